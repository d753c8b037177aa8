// Package launch is the privilege split between the driver and the stfs
// daemons.  The driver (root) opens /dev/fuse and mounts it; it hands the
// descriptor, by SCM_RIGHTS, with the source, the options and the
// credentials, over a Unix socket to the launcher (`stfs-csi daemon`),
// which runs as a non-root user with no capability and starts
// `stfs mount -f -o OPTS SOURCE /dev/fd/3` with the credentials in its
// environment: never in argv, never in a file, never in a log.
//
// One connection per daemon: the request (a length and JSON, the
// descriptor on its first byte), the launcher's answer (the daemon's pid,
// or why it could not start), and, when the daemon exits, its exit status
// and the last lines it wrote.  The driver keeps the connection open for
// the daemon's life: its end is how the driver learns that a daemon died.
package launch

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Request is what the driver asks the launcher for.
type Request struct {
	ID      string            `json:"id"`      // the daemon's key, for its log lines
	Source  string            `json:"source"`  // stfs's SOURCE
	Options []string          `json:"options"` // stfs -o options
	Env     map[string]string `json:"env"`     // credentials: HF_TOKEN, AWS_*
}

// Event is what the launcher answers: first Started (or Error), later
// Exited.
type Event struct {
	Started bool   `json:"started,omitempty"`
	Pid     int    `json:"pid,omitempty"`
	Exited  bool   `json:"exited,omitempty"`
	Status  int    `json:"status,omitempty"` // its class: stfs(1), EXIT STATUS
	Stderr  string `json:"stderr,omitempty"` // the daemon's last lines
	Error   string `json:"error,omitempty"`
}

const maxMessage = 1 << 20

// WriteMessage sends v as a length and JSON; fd (if >= 0) rides on it.
func WriteMessage(c *net.UnixConn, v any, fd int) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > maxMessage {
		return errors.New("launch: message too large")
	}
	msg := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(msg, uint32(len(body)))
	copy(msg[4:], body)
	var oob []byte
	if fd >= 0 {
		oob = syscall.UnixRights(fd)
	}
	n, oobn, err := c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if oobn != len(oob) {
		return errors.New("launch: descriptor not sent")
	}
	if n < len(msg) {
		_, err = c.Write(msg[n:])
	}
	return err
}

// ReadMessage reads one message into v; the descriptor that came with it
// is returned (-1: none).  Any other descriptors are closed.
func ReadMessage(c *net.UnixConn, v any) (int, error) {
	head := make([]byte, 4)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	fd := -1
	n, oobn, _, _, err := c.ReadMsgUnix(head, oob)
	if err != nil {
		return -1, err
	}
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				fds, rerr := syscall.ParseUnixRights(&m)
				if rerr != nil {
					continue
				}
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						syscall.Close(f)
					}
				}
			}
		}
	}
	fail := func(e error) (int, error) {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return -1, e
	}
	if n == 0 {
		return fail(io.EOF)
	}
	if n < 4 {
		if _, err := io.ReadFull(c, head[n:]); err != nil {
			return fail(err)
		}
	}
	size := binary.BigEndian.Uint32(head)
	if size > maxMessage {
		return fail(fmt.Errorf("launch: message of %d bytes", size))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return fail(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fail(fmt.Errorf("launch: bad message: %v", err))
	}
	return fd, nil
}
