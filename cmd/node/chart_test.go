package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// chartEnv names the directory `make chart` (scripts/chart.sh) renders the Helm chart
// into: NAME.yaml is `helm template` with the values of NAME.values.yaml. Without it
// the test skips, so `go test ./...` needs no helm.
const chartEnv = "LEAPCOUNT_CHART_RENDERED"

// What the kubelet puts in the pod's fieldRef variables, for the check.
const (
	podName = "lc-leapcount-0"
	podIP   = "10.20.30.40"
)

// TestChartRenderings checks each rendering of deploy/helm/leapcount against the node
// itself: the pod gives the node only flags it defines, a configuration it accepts,
// ports that are the ones it listens on, probes and a scrape path it serves, Secrets
// that exist, and time enough to drain.
func TestChartRenderings(t *testing.T) {
	dir := os.Getenv(chartEnv)
	if dir == "" {
		t.Skipf("%s is not set: `make chart` renders the Helm chart and runs this test", chartEnv)
	}
	values, err := filepath.Glob(filepath.Join(dir, "*.values.yaml"))
	if err != nil || len(values) == 0 {
		t.Fatalf("no renderings (*.values.yaml) in %s: %v", dir, err)
	}
	bin := nodeBinary(t)
	for _, vf := range values {
		name := strings.TrimSuffix(filepath.Base(vf), ".values.yaml")
		t.Run(name, func(t *testing.T) {
			r := loadRendering(t, filepath.Join(dir, name+".yaml"), vf)
			r.checkFlags(t)
			r.checkPorts(t)
			r.checkServices(t)
			r.checkSecrets(t)
			r.checkShutdown(t)
			r.checkSecurity(t)
			r.checkServed(t, bin)
			r.checkRules(t, name == "generated-secrets") // its values enable the rules
		})
	}
}

// rendering is one `helm template` output, with the node's view of its pod.
type rendering struct {
	objs    []object
	sts     statefulSetSpec
	pod     podSpec
	node    container
	flags   *flagValues // what the node makes of the container's args and env
	userSet []string    // the existingSecret names of the values rendered with
}

func loadRendering(t *testing.T, manifest, valuesFile string) *rendering {
	t.Helper()
	objs, err := readManifests(manifest)
	if err != nil {
		t.Fatal(err)
	}
	sets := kindOf(objs, "StatefulSet")
	if len(sets) != 1 {
		t.Fatalf("%d StatefulSets; want 1", len(sets))
	}
	r := &rendering{objs: objs}
	if err := decodeSpec(sets[0], &r.sts); err != nil {
		t.Fatal(err)
	}
	r.pod = r.sts.Template.Spec
	if len(r.pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(r.pod.Containers))
	}
	r.node = r.pod.Containers[0]
	r.userSet = existingSecrets(t, valuesFile)
	return r
}

// checkFlags: every --flag and LEAPCOUNT_* variable is one the node defines (readFlags
// refuses others), and the node accepts the configuration they make.
func (r *rendering) checkFlags(t *testing.T) {
	defined := map[string]bool{}
	newFlagSet(&flagValues{}, io.Discard).VisitAll(func(f *flag.Flag) { defined[EnvName(f.Name)] = true })
	env := map[string]string{}
	for _, e := range r.node.Env {
		if strings.HasPrefix(e.Name, "LEAPCOUNT_") && !defined[e.Name] {
			t.Errorf("env %s sets no flag of the node", e.Name)
		}
		env[e.Name] = envValue(t, e)
	}
	v, err := readFlags(r.node.Args, func(k string) (string, bool) { s, ok := env[k]; return s, ok }, io.Discard)
	if err != nil {
		t.Fatalf("the node refuses args %q: %v", r.node.Args, err)
	}
	r.flags = v
	if err := v.cfg.Validate(); err != nil {
		t.Errorf("the node refuses the pod's configuration: %v", err)
	}
	if v.cfg.Name != podName || v.cfg.Advertise != podIP {
		t.Errorf("name %q, advertise %q; want the pod's name and IP", v.cfg.Name, v.cfg.Advertise)
	}
}

// envValue is what a variable holds in a running pod; a Secret's value is a stand-in
// of the right shape.
func envValue(t *testing.T, e envVar) string {
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil:
		return map[string]string{"metadata.name": podName, "status.podIP": podIP}[e.ValueFrom.FieldRef.FieldPath]
	case e.ValueFrom.SecretKeyRef != nil && e.Name == EnvName("redis"):
		return "redis://user:pass@redis.example:6379/0"
	}
	t.Errorf("env %s: a source the check does not know", e.Name)
	return ""
}

// checkPorts: the container ports are exactly the node's listeners (gossip on TCP and
// UDP), each bound on every interface so peers and the kubelet reach it.
func (r *rendering) checkPorts(t *testing.T) {
	cfg := r.flags.cfg
	want := map[string]string{
		"http": "TCP/" + port(t, cfg.HTTPAddr), "resp": "TCP/" + port(t, cfg.RESPAddr),
		"gossip": "TCP/" + port(t, cfg.GossipAddr), "gossip-udp": "UDP/" + port(t, cfg.GossipAddr),
		"rpc": "TCP/" + port(t, cfg.RPCAddr),
	}
	if cfg.RESPCluster != "" {
		want["resp-cluster"] = "TCP/" + port(t, cfg.RESPCluster)
	}
	if cfg.HTTPTLSAddr != "" {
		want["http-tls"] = "TCP/" + port(t, cfg.HTTPTLSAddr)
	}
	if cfg.RESPTLSAddr != "" {
		want["resp-tls"] = "TCP/" + port(t, cfg.RESPTLSAddr)
	}
	got := map[string]string{}
	for _, p := range r.node.Ports {
		got[p.Name] = p.Protocol + "/" + strconv.Itoa(p.ContainerPort)
	}
	if !maps.Equal(got, want) {
		t.Errorf("container ports %v; the node listens on %v", got, want)
	}
	for _, a := range []string{cfg.HTTPAddr, cfg.RESPAddr, cfg.GossipAddr, cfg.RPCAddr} {
		if host, _, _ := net.SplitHostPort(a); host != "0.0.0.0" {
			t.Errorf("the node listens on %s: want every interface of the pod", a)
		}
	}
}

func port(t *testing.T, hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Errorf("address %q: %v", hostport, err)
	}
	return p
}

// checkServices: --join is the headless Service's name on the gossip port, the Service
// lists pods before they are ready, and every Service port targets a container port.
func (r *rendering) checkServices(t *testing.T) {
	ports := map[string]bool{}
	for _, p := range r.node.Ports {
		ports[p.Name], ports[strconv.Itoa(p.ContainerPort)] = true, true
	}
	var headless serviceSpec
	for _, o := range kindOf(r.objs, "Service") {
		var s serviceSpec
		if err := decodeSpec(o, &s); err != nil {
			t.Fatal(err)
		}
		if !subset(s.Selector, r.sts.Template.Metadata.Labels) {
			t.Errorf("Service %s selects %v, not the pods (%v)", o.Metadata.Name, s.Selector, r.sts.Template.Metadata.Labels)
		}
		for _, p := range s.Ports {
			if !ports[p.TargetPort] {
				t.Errorf("Service %s port %s targets %q, no container port", o.Metadata.Name, p.Name, p.TargetPort)
			}
		}
		if o.Metadata.Name == r.sts.ServiceName {
			headless = s
		}
	}
	if headless.ClusterIP != "None" || !headless.PublishNotReadyAddresses {
		t.Errorf("Service %q (serviceName): clusterIP %q, publishNotReadyAddresses %v; want None, true",
			r.sts.ServiceName, headless.ClusterIP, headless.PublishNotReadyAddresses)
	}
	join := r.flags.cfg.Join
	if len(join) != 1 || !strings.HasPrefix(join[0], r.sts.ServiceName+".") ||
		!strings.HasSuffix(join[0], ".svc.cluster.local.:"+port(t, r.flags.cfg.GossipAddr)) {
		t.Errorf("--join %q; want the headless Service %s's DNS name and the gossip port", join, r.sts.ServiceName)
	}
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// existingSecrets lists the existingSecret values of a values file: Secrets the user
// provides (values.yaml documents each), which the chart may name without making them.
func existingSecrets(t *testing.T, valuesFile string) []string {
	b, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatalf("%s: %v", valuesFile, err)
	}
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i++ {
			if n.Kind == yaml.MappingNode && i%2 == 0 && n.Content[i].Value == "existingSecret" && n.Content[i+1].Value != "" {
				out = append(out, n.Content[i+1].Value)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return out
}

// checkSecrets: every Secret the pod names is rendered (with the key it reads) or is
// one the values say the user provides; every file flag points into a Secret volume.
func (r *rendering) checkSecrets(t *testing.T) {
	rendered := map[string]map[string]string{}
	for _, o := range kindOf(r.objs, "Secret") {
		rendered[o.Metadata.Name] = o.Data
	}
	needs := func(what, name, key string) {
		data, ok := rendered[name]
		switch {
		case ok && key != "" && data[key] == "":
			t.Errorf("%s: Secret %s has no key %q", what, name, key)
		case !ok && !slices.Contains(r.userSet, name):
			t.Errorf("%s: Secret %s is neither rendered nor an existingSecret of the values", what, name)
		}
	}
	for _, e := range r.node.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			needs("env "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		}
	}
	secretOf := map[string]string{}
	for _, v := range r.pod.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
			needs("volume "+v.Name, v.Secret.SecretName, "")
		}
	}
	cfg := r.flags.cfg
	files := map[string]string{"token-file": cfg.TokenFile, "tls-cert": cfg.TLSCertFile, "tls-key": cfg.TLSKeyFile,
		"tls-ca": cfg.TLSCAFile, "gossip-key-file": r.flags.gossipKeyFile, "client-tls-cert": cfg.ClientTLSCertFile,
		"client-tls-key": cfg.ClientTLSKeyFile, "client-tls-ca": cfg.ClientTLSCAFile}
	for name, path := range files {
		if path == "" {
			continue
		}
		m, ok := r.mountOf(path)
		if !ok || secretOf[m.Name] == "" {
			t.Errorf("--%s %s is in no Secret volume", name, path)
			continue
		}
		needs("--"+name, secretOf[m.Name], filepath.Base(path))
	}
}

// mountOf finds the volume mount a file is directly in.
func (r *rendering) mountOf(path string) (volumeMount, bool) {
	for _, m := range r.node.VolumeMounts {
		if filepath.Dir(path) == filepath.Clean(m.MountPath) {
			return m, true
		}
	}
	return volumeMount{}, false
}

// checkShutdown: the kubelet waits for the preStop sleep and the node's whole drain
// (--shutdown-timeout) before it kills the node; the PodDisruptionBudget, when there is
// one, lets one member go at a time.
func (r *rendering) checkShutdown(t *testing.T) {
	sleep := 0
	if ps := r.node.Lifecycle.PreStop; ps != nil && ps.Sleep != nil {
		sleep = ps.Sleep.Seconds
	}
	need := time.Duration(sleep)*time.Second + r.flags.cfg.ShutdownTimeout
	if grace := time.Duration(r.pod.TerminationGracePeriodSeconds) * time.Second; grace <= need {
		t.Errorf("terminationGracePeriodSeconds %v; want more than the preStop sleep and --shutdown-timeout (%v)", grace, need)
	}
	for _, o := range kindOf(r.objs, "PodDisruptionBudget") {
		var p pdbSpec
		if err := decodeSpec(o, &p); err != nil {
			t.Fatal(err)
		}
		if p.MaxUnavailable != "1" || !subset(p.Selector.MatchLabels, r.sts.Template.Metadata.Labels) {
			t.Errorf("PodDisruptionBudget: maxUnavailable %q selecting %v; want 1, the pods", p.MaxUnavailable, p.Selector.MatchLabels)
		}
	}
}

func (r *rendering) checkSecurity(t *testing.T) {
	if !r.pod.SecurityContext.RunAsNonRoot || !r.node.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("runAsNonRoot %v, readOnlyRootFilesystem %v; want both", r.pod.SecurityContext.RunAsNonRoot,
			r.node.SecurityContext.ReadOnlyRootFilesystem)
	}
}

// checkServed runs the real node, with a token when the pod has one, and asks it what
// the kubelet and Prometheus will: the probes' paths and the scrape path, without any
// credentials. Each must answer 200, on the node's HTTP port.
func (r *rendering) checkServed(t *testing.T, bin string) {
	args := []string{"--name", "chart"}
	if r.flags.cfg.TokenFile != "" {
		args = append(args, "--token-file", writeFile(t, "token", "chart-token\n"))
	}
	p := startBinary(t, bin, args...)
	httpPort := port(t, r.flags.cfg.HTTPAddr)
	paths := map[string]string{}
	for name, pr := range map[string]*probe{"readiness": r.node.ReadinessProbe, "liveness": r.node.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", name)
			continue
		}
		if pr.HTTPGet.Port != "http" && pr.HTTPGet.Port != httpPort {
			t.Errorf("%s probe on port %q; want the HTTP port (http, %s)", name, pr.HTTPGet.Port, httpPort)
		}
		paths[name+" probe"] = pr.HTTPGet.Path
	}
	if a := r.sts.Template.Metadata.Annotations; a["prometheus.io/scrape"] == "true" {
		if a["prometheus.io/port"] != httpPort {
			t.Errorf("scrape port %q; want the HTTP port %s", a["prometheus.io/port"], httpPort)
		}
		paths["scrape"] = a["prometheus.io/path"]
	}
	for what, path := range paths {
		if err := get200(p.http, path); err != nil {
			t.Errorf("%s %s: %v", what, path, err)
		}
	}
}

func get200(addr, path string) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the node answers %d %s; want 200", resp.StatusCode, body)
	}
	return nil
}

// checkRules: a PrometheusRule, when the chart renders one (it must when enabled),
// holds exactly the rules of deploy/prometheus (which make test checks with promtool).
func (r *rendering) checkRules(t *testing.T, enabled bool) {
	if n := len(kindOf(r.objs, "PrometheusRule")); enabled != (n == 1) {
		t.Errorf("%d PrometheusRules; want %d", n, map[bool]int{true: 1}[enabled])
	}
	data, err := os.ReadFile("../../deploy/prometheus/leapcount-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for _, o := range kindOf(r.objs, "PrometheusRule") {
		var got any
		if err := decodeSpec(o, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("PrometheusRule %s: spec differs from deploy/prometheus/leapcount-rules.yaml", o.Metadata.Name)
		}
	}
}
