// csicall: one CSI call, for the tests (tests/csi/test_csi.py): the call as
// JSON on standard input (so that secrets never are in argv),
//
//	{"endpoint": "unix:///PATH", "method": "NodePublishVolume", "request": {...}}
//
// with the request in protobuf's JSON form; on standard output
// {"code": "OK" or the gRPC code's name, "message": ..., "response": {...}}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

type call struct {
	Endpoint string          `json:"endpoint"`
	Method   string          `json:"method"`
	Request  json.RawMessage `json:"request"`
	Timeout  float64         `json:"timeout"`
}

func main() {
	var c call
	if err := json.NewDecoder(os.Stdin).Decode(&c); err != nil {
		fmt.Fprintln(os.Stderr, "csicall:", err)
		os.Exit(2)
	}
	conn, err := grpc.NewClient(c.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "csicall:", err)
		os.Exit(2)
	}
	defer conn.Close()
	if c.Timeout == 0 {
		c.Timeout = 120
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.Timeout*float64(time.Second)))
	defer cancel()
	node, id := csi.NewNodeClient(conn), csi.NewIdentityClient(conn)
	var req, resp proto.Message
	switch c.Method {
	case "NodePublishVolume":
		req = &csi.NodePublishVolumeRequest{}
	case "NodeUnpublishVolume":
		req = &csi.NodeUnpublishVolumeRequest{}
	case "NodeGetInfo":
		req = &csi.NodeGetInfoRequest{}
	case "GetPluginInfo":
		req = &csi.GetPluginInfoRequest{}
	case "Probe":
		req = &csi.ProbeRequest{}
	default:
		fmt.Fprintln(os.Stderr, "csicall: unknown method", c.Method)
		os.Exit(2)
	}
	if len(c.Request) > 0 {
		if err := protojson.Unmarshal(c.Request, req); err != nil {
			fmt.Fprintln(os.Stderr, "csicall:", err)
			os.Exit(2)
		}
	}
	t := time.Now()
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		resp, err = node.NodePublishVolume(ctx, r)
	case *csi.NodeUnpublishVolumeRequest:
		resp, err = node.NodeUnpublishVolume(ctx, r)
	case *csi.NodeGetInfoRequest:
		resp, err = node.NodeGetInfo(ctx, r)
	case *csi.GetPluginInfoRequest:
		resp, err = id.GetPluginInfo(ctx, r)
	case *csi.ProbeRequest:
		resp, err = id.Probe(ctx, r)
	}
	out := map[string]any{"seconds": time.Since(t).Seconds()}
	if err != nil {
		st := status.Convert(err)
		out["code"], out["message"] = st.Code().String(), st.Message()
	} else {
		out["code"] = "OK"
		b, _ := protojson.Marshal(resp)
		out["response"] = json.RawMessage(b)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
