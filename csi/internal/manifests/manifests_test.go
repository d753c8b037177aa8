package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"stfs/csi/internal/driver"
)

const dir = "../../../deploy/kubernetes"

// kustomization: the fields the project's kustomization.yaml uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// podMonitor: the fields of the Prometheus Operator's PodMonitor
// (monitoring.coreos.com/v1) the example uses, decoded strictly.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			Relabelings   []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// object: one document decoded strictly into its kind's Go type.
func object(t *testing.T, where string, doc []byte) any {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var obj any
	switch head.APIVersion + " " + head.Kind {
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "v1 PersistentVolume":
		obj = &corev1.PersistentVolume{}
	case "v1 PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "monitoring.coreos.com/v1 PodMonitor":
		obj = &podMonitor{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	case "storage.k8s.io/v1 CSIDriver":
		obj = &storagev1.CSIDriver{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		obj = &kustomization{}
	default:
		t.Fatalf("%s: no Go type for %s %s", where, head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s: %v", where, head.Kind, err)
	}
	return obj
}

func documents(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// volume checks an stfs volume's attributes, and the keys of the secret
// it names (if the manifests hold it), as the driver would.
func volume(t *testing.T, where, drv string, attrs map[string]string, ro bool, secret map[string]string) {
	if drv != driver.Name {
		t.Errorf("%s: driver %q, want %q", where, drv, driver.Name)
	}
	if !ro {
		t.Errorf("%s: an stfs volume is readOnly", where)
	}
	if _, err := driver.ParseVolume(attrs, secret); err != nil {
		t.Errorf("%s: the driver refuses its attributes: %v", where, err)
	}
}

// secretOf: the data of the Secret ref names among secrets, or nil.
func secretOf(secrets map[string]*corev1.Secret, ref *corev1.SecretReference, lref *corev1.LocalObjectReference) map[string]string {
	name := ""
	if ref != nil {
		name = ref.Name
	} else if lref != nil {
		name = lref.Name
	}
	s := secrets[name]
	if s == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range s.StringData {
		out[k] = v
	}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// checkMirrorJob: a Job that runs `stfs mirror SOURCE s3://DEST` is
// followed, in its file, by a Deployment whose volume reads SOURCE with
// the mirror DEST (the warm Job's example).
func checkMirrorJob(t *testing.T, where string, j *batchv1.Job, deps []*appsv1.Deployment) {
	for _, c := range j.Spec.Template.Spec.Containers {
		cmd := append(append([]string{}, c.Command...), c.Args...)
		if len(cmd) < 4 || cmd[0] != "stfs" || cmd[1] != "mirror" {
			continue
		}
		src, dest := cmd[len(cmd)-2], cmd[len(cmd)-1]
		for _, d := range deps {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.CSI != nil && v.CSI.VolumeAttributes["source"] == src &&
					v.CSI.VolumeAttributes["mirror"] == dest {
					return
				}
			}
		}
		t.Errorf("%s: no Deployment reads %s with the mirror %s", where, src, dest)
	}
}

func TestManifests(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	ex, _ := filepath.Glob(filepath.Join(dir, "examples", "*.yaml"))
	files = append(files, ex...)
	if len(files) < 6 {
		t.Fatalf("only %d manifests under %s", len(files), dir)
	}
	kinds := map[string]int{}
	var node *corev1.PodSpec
	var services []*corev1.Service
	var monitors []*podMonitor
	for _, f := range files {
		secrets := map[string]*corev1.Secret{}
		var jobs []*batchv1.Job
		var deps []*appsv1.Deployment
		for i, doc := range documents(t, f) {
			where := filepath.Base(f) + "#" + string(rune('0'+i))
			switch o := object(t, where, doc).(type) {
			case *corev1.Secret:
				secrets[o.Name] = o
			case *batchv1.Job:
				jobs = append(jobs, o)
			case *kustomization:
				kinds["Kustomization"]++
				for _, r := range o.Resources {
					if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
						t.Errorf("%s: resource %s: %v", where, r, err)
					}
				}
			case *storagev1.CSIDriver:
				kinds["CSIDriver"]++
				s := o.Spec
				if o.Name != driver.Name || s.AttachRequired == nil || *s.AttachRequired ||
					s.PodInfoOnMount == nil || !*s.PodInfoOnMount || len(s.VolumeLifecycleModes) != 2 {
					t.Errorf("%s: %+v", where, s)
				}
			case *appsv1.DaemonSet:
				kinds["DaemonSet"]++
				checkNode(t, where, &o.Spec.Template.Spec)
				node = &o.Spec.Template.Spec
				if !selects(o.Spec.Selector.MatchLabels, o.Spec.Template.Labels) {
					t.Errorf("%s: the selector misses the pods", where)
				}
			case *corev1.Service:
				kinds["Service"]++
				services = append(services, o)
			case *podMonitor:
				kinds["PodMonitor"]++
				monitors = append(monitors, o)
			case *corev1.PersistentVolume:
				kinds["PersistentVolume"]++
				c := o.Spec.CSI
				if c == nil || len(o.Spec.AccessModes) != 1 || o.Spec.AccessModes[0] != corev1.ReadOnlyMany {
					t.Errorf("%s: not a ReadOnlyMany CSI volume", where)
					continue
				}
				volume(t, where, c.Driver, c.VolumeAttributes, c.ReadOnly, secretOf(secrets, c.NodePublishSecretRef, nil))
			case *corev1.Pod:
				checkPod(t, where, &o.Spec, secrets)
			case *appsv1.Deployment:
				checkPod(t, where, &o.Spec.Template.Spec, secrets)
				deps = append(deps, o)
			}
		}
		for _, j := range jobs {
			checkMirrorJob(t, filepath.Base(f)+" job "+j.Name, j, deps)
		}
	}
	for _, k := range []string{"Kustomization", "CSIDriver", "DaemonSet", "PersistentVolume", "Service", "PodMonitor"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	if node != nil {
		checkMetrics(t, node, services, monitors)
	}
}

// selects: every label of sel is on labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// checkMetrics: the plugin's --metrics-address port is its container port
// "metrics", unique in the pod; the Service and the PodMonitor select the
// node's pods and name that port.
func checkMetrics(t *testing.T, p *corev1.PodSpec, services []*corev1.Service, monitors []*podMonitor) {
	port := int32(0)
	seen := map[int32]string{}
	var labels map[string]string
	for _, c := range p.Containers {
		for _, cp := range c.Ports {
			if o, dup := seen[cp.ContainerPort]; dup {
				t.Errorf("port %d: %s and %s", cp.ContainerPort, o, c.Name)
			}
			seen[cp.ContainerPort] = c.Name
			if cp.Name == "metrics" && c.Name == "plugin" {
				port = cp.ContainerPort
			}
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--health-port=") {
				var hp int32
				fmt.Sscanf(a, "--health-port=%d", &hp)
				if o, dup := seen[hp]; dup && o != "plugin" {
					t.Errorf("the health port %d is %s's", hp, o)
				}
			}
		}
		if c.Name == "plugin" && !strings.Contains(strings.Join(c.Args, " "), fmt.Sprintf("--metrics-address=:%d", port)) {
			t.Errorf("the plugin's --metrics-address is not its metrics port %d: %q", port, c.Args)
		}
	}
	labels = map[string]string{"app.kubernetes.io/name": "stfs-csi-node"}
	if port == 0 {
		t.Errorf("the plugin has no container port named metrics")
	}
	for _, s := range services {
		if !selects(s.Spec.Selector, labels) || len(s.Spec.Ports) != 1 ||
			s.Spec.Ports[0].TargetPort.String() != "metrics" || s.Spec.Ports[0].Port != port {
			t.Errorf("Service %s: not the plugin's metrics port: %+v", s.Name, s.Spec)
		}
	}
	for _, m := range monitors {
		if !selects(m.Spec.Selector.MatchLabels, labels) || len(m.Spec.PodMetricsEndpoints) != 1 ||
			m.Spec.PodMetricsEndpoints[0].Port != "metrics" || m.Spec.PodMetricsEndpoints[0].Path != "/metrics" {
			t.Errorf("PodMonitor %s: not the plugin's metrics port: %+v", m.Metadata.Name, m.Spec)
		}
	}
}

func checkPod(t *testing.T, where string, p *corev1.PodSpec, secrets map[string]*corev1.Secret) {
	for _, v := range p.Volumes {
		if c := v.CSI; c != nil {
			volume(t, where+" volume "+v.Name, c.Driver, c.VolumeAttributes, c.ReadOnly != nil && *c.ReadOnly,
				secretOf(secrets, nil, c.NodePublishSecretRef))
		}
	}
	for _, c := range p.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("%s: %s: %s without HostToContainer: a daemon's recovery would not reach it", where, c.Name, m.MountPath)
			}
		}
	}
}

func checkNode(t *testing.T, where string, p *corev1.PodSpec) {
	names := map[string]*corev1.Container{}
	for i := range p.Containers {
		names[p.Containers[i].Name] = &p.Containers[i]
	}
	for _, n := range []string{"plugin", "daemons"} {
		if names[n] == nil {
			t.Errorf("%s: no %s container", where, n)
		}
	}
	// no sidecar: the plugin registers with kubelet and serves its own
	// liveness (every container runs the driver's image)
	for _, c := range p.Containers {
		if c.Image != "stfs-csi" && !strings.HasPrefix(c.Image, "stfs-csi:") {
			t.Errorf("%s: container %s runs %s: a sidecar the plugin does without", where, c.Name, c.Image)
		}
	}
	if pl := names["plugin"]; pl != nil {
		checkKubelet(t, where, p, pl)
	}
	if d := names["daemons"]; d != nil {
		s := d.SecurityContext
		if s == nil || s.RunAsUser == nil || *s.RunAsUser == 0 || s.RunAsNonRoot == nil || !*s.RunAsNonRoot ||
			s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
			s.Capabilities == nil || len(s.Capabilities.Drop) != 1 || s.Capabilities.Drop[0] != "ALL" ||
			(s.Privileged != nil && *s.Privileged) {
			t.Errorf("%s: the daemons' container is not unprivileged: %+v", where, s)
		}
	}
	if pl := names["plugin"]; pl != nil {
		args := strings.Join(pl.Args, " ")
		for _, want := range []string{"--endpoint=unix://", "--node-id=$(NODE_NAME)", "--launcher=", "--cache-dir="} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: plugin args %q lack %s", where, args, want)
			}
		}
		bidi := false
		for _, m := range pl.VolumeMounts {
			if m.MountPath == "/var/lib/kubelet/pods" && m.MountPropagation != nil &&
				*m.MountPropagation == corev1.MountPropagationBidirectional {
				bidi = true
			}
		}
		if !bidi {
			t.Errorf("%s: the plugin's mounts would not reach the pods (Bidirectional on /var/lib/kubelet/pods)", where)
		}
	}
}

// checkKubelet: the plugin's registration socket is in kubelet's
// plugins_registry, the path it tells kubelet is its CSI socket on the
// node, and the liveness probe asks its own --health-address.
func checkKubelet(t *testing.T, where string, p *corev1.PodSpec, pl *corev1.Container) {
	arg := map[string]string{}
	for _, a := range pl.Args {
		if k, v, ok := strings.Cut(a, "="); ok {
			arg[k] = v
		}
	}
	hostOf := func(mountPath string) string { // the hostPath mounted there
		for _, m := range pl.VolumeMounts {
			if m.MountPath != mountPath {
				continue
			}
			for _, v := range p.Volumes {
				if v.Name == m.Name && v.HostPath != nil {
					return v.HostPath.Path
				}
			}
		}
		return ""
	}
	if h := hostOf(arg["--registration-dir"]); h != "/var/lib/kubelet/plugins_registry" {
		t.Errorf("%s: --registration-dir=%q is not kubelet's plugins_registry (%q)", where, arg["--registration-dir"], h)
	}
	ep := strings.TrimPrefix(arg["--endpoint"], "unix://")
	if h := hostOf(path.Dir(ep)); h == "" || path.Join(h, path.Base(ep)) != arg["--kubelet-registration-path"] {
		t.Errorf("%s: --kubelet-registration-path=%q is not the endpoint %s on the node (%s)", where, arg["--kubelet-registration-path"], ep, h)
	}
	_, port, _ := strings.Cut(arg["--health-address"], ":")
	lp := pl.LivenessProbe
	if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: the plugin has no liveness probe on /healthz", where)
		return
	}
	want := lp.HTTPGet.Port.String()
	for _, cp := range pl.Ports {
		if cp.Name == want {
			want = strconv.Itoa(int(cp.ContainerPort))
		}
	}
	if port == "" || port != want {
		t.Errorf("%s: the liveness probe asks port %s, --health-address is %q", where, want, arg["--health-address"])
	}
}

// TestStrict: the decoding above fails on what it should.
func TestStrict(t *testing.T) {
	bad := map[string]string{
		"unknown field": "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: x}\nspec: {attachRequird: false}\n",
		"wrong type":    "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: x}\nspec: {attachRequired: \"no\"}\n",
		"duplicate":     "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\nmetadata: {name: y}\n",
	}
	for what, doc := range bad {
		var o storagev1.CSIDriver
		if what == "duplicate" {
			var n corev1.Namespace
			if yaml.UnmarshalStrict([]byte(doc), &n) == nil {
				t.Errorf("%s: accepted", what)
			}
			continue
		}
		if yaml.UnmarshalStrict([]byte(doc), &o) == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}
