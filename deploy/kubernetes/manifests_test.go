package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The manifests beside this file, checked twice: against the Kubernetes
// API types (every document decodes strictly into the type its apiVersion
// and kind name: no unknown or misspelt field, no value of the wrong type),
// and against what a schema cannot know — that the peers the pods dial are
// the headless Service's names, that ports, probes, volumes and flags agree,
// that the real binary accepts the arguments and answers the probes, and
// that the certificates make-certs.sh makes carry the names in use.

// namespace is the namespace the checks expand $(POD_NAMESPACE) with.
const namespace = "ns"

// manifests are the decoded documents of every *.yaml here.
type manifests struct {
	sts      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
}

// newObject is the typed object for a document's apiVersion and kind.
func newObject(tm metav1.TypeMeta) (any, error) {
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a kind these manifests use", tm.APIVersion, tm.Kind)
}

// decodeStrict decodes one YAML document into its API type as the API
// server does: field names matched case-sensitively, unknown and duplicate
// fields refused.
func decodeStrict(doc []byte) (any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, err
	}
	obj, err := newObject(tm)
	if err != nil {
		return nil, err
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	return obj, errors.Join(strict...)
}

func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	m := manifests{services: map[string]*corev1.Service{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, err := decodeStrict(doc)
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i, err)
			}
			switch o := obj.(type) {
			case *appsv1.StatefulSet:
				if m.sts != nil {
					t.Fatalf("%s: a second StatefulSet", f)
				}
				m.sts = o
			case *corev1.Service:
				m.services[o.Name] = o
			case *policyv1.PodDisruptionBudget:
				m.pdb = o
			}
		}
	}
	if m.sts == nil || m.pdb == nil || len(m.services) != 2 {
		t.Fatalf("want a StatefulSet, a PodDisruptionBudget and two Services; got %v, %v, %d Services", m.sts != nil, m.pdb != nil, len(m.services))
	}
	return m
}

func stripComments(doc []byte) []byte {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(doc, nil)
}

// TestStrictDecodingRefusesMistakes: the decoding the checks rely on
// refuses a misspelt field, a value of the wrong type and an unknown kind.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n",
		"wrong type":       "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replicas: three}\n",
		"unknown kind":     "apiVersion: v1\nkind: Servcie\nmetadata: {name: x}\n",
		"duplicated field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ClusterIP, type: NodePort}\n",
	} {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// container is the StatefulSet's one container.
func (m manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, got %d", len(cs))
	}
	return cs[0]
}

// expandArgs expands $(VAR) in the container's args as the kubelet does,
// from its env; a variable from the pod's fields takes fields' value.
func expandArgs(t *testing.T, c corev1.Container, fields map[string]string) []string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: field %s is not one the checks know", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vars[e.Name] = v
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		default:
			t.Fatalf("env %s: only values and pod fields are expected", e.Name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(s string) string {
			v, ok := vars[s[2:len(s)-1]]
			if !ok {
				t.Fatalf("arg %q: %s is not in the container's env", a, s)
			}
			return v
		}))
	}
	return args
}

// flagsOf reads --name=value args (serve's, after "serve").
func flagsOf(t *testing.T, args []string) map[string]string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q: want serve and its flags", args)
	}
	flags := map[string]string{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("arg %q: write flags as --name=value", a)
		}
		if _, dup := flags[name]; dup {
			t.Fatalf("--%s given twice", name)
		}
		flags[name] = value
	}
	return flags
}

func podFields(ordinal int) map[string]string {
	return map[string]string{"metadata.name": fmt.Sprintf("leasehold-%d", ordinal), "metadata.namespace": namespace,
		"status.podIP": fmt.Sprintf("10.1.0.%d", ordinal+1)}
}

// containerPort is the container's port by name.
func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("the container has no port named %q", name)
	return 0
}

// portOf is the port of a host:port flag value.
func portOf(t *testing.T, flag, hostPort string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Fatalf("--%s=%s: not host:port", flag, hostPort)
	}
	return int32(n)
}

// TestPeersAreTheHeadlessServicesNames: every pod's node id is its name,
// its peers are exactly the StatefulSet's pods under the headless Service,
// at the raft port, and every port a flag names is the container's port
// that the Services target.
func TestPeersAreTheHeadlessServicesNames(t *testing.T) {
	m := load(t)
	sts, c := m.sts, m.container(t)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("replicas %v, want 3", sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: want Parallel; in order, pod 0 waits to be ready, which needs a quorum of pods", sts.Spec.PodManagementPolicy)
	}
	headless := m.services[sts.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("serviceName %q is not a headless Service here", sts.Spec.ServiceName)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service %s: want publishNotReadyAddresses, or no pod's name resolves before a quorum is ready", headless.Name)
	}
	podLabels := labels.Set(sts.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		t.Errorf("the StatefulSet's selector %v does not match its pods' labels %v (%v)", sts.Spec.Selector, podLabels, err)
	}
	raftPort, apiPort := containerPort(t, c, "raft"), containerPort(t, c, "api")
	for _, svc := range m.services {
		if errs := validation.IsDNS1035Label(svc.Name); len(errs) > 0 {
			t.Errorf("Service %s: %v", svc.Name, errs)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s selects %v, not the pods (%v)", svc.Name, svc.Spec.Selector, podLabels)
		}
		for _, p := range svc.Spec.Ports {
			if containerPort(t, c, p.TargetPort.String()) != p.Port {
				t.Errorf("Service %s port %s: %d, but it targets container port %s (%d): clients and peers dial the Service's",
					svc.Name, p.Name, p.Port, p.TargetPort.String(), containerPort(t, c, p.TargetPort.String()))
			}
		}
	}
	for ordinal := range int(*sts.Spec.Replicas) {
		pod := fmt.Sprintf("%s-%d", sts.Name, ordinal)
		flags := flagsOf(t, expandArgs(t, c, podFields(ordinal)))
		if flags["node-id"] != pod {
			t.Errorf("%s: --node-id=%s, want the pod's name", pod, flags["node-id"])
		}
		var want []string
		for i := range int(*sts.Spec.Replicas) {
			id := fmt.Sprintf("%s-%d", sts.Name, i)
			want = append(want, fmt.Sprintf("%s=%s.%s.%s.svc:%d", id, id, headless.Name, namespace, raftPort))
		}
		if got := strings.Split(flags["peers"], ","); !slices.Equal(got, want) {
			t.Errorf("%s: --peers %v, want the pods' names under the headless Service: %v", pod, got, want)
		}
		for flag, port := range map[string]int32{"raft-addr": raftPort, "advertise": raftPort, "api-addr": apiPort} {
			if got := portOf(t, flag, flags[flag]); got != port {
				t.Errorf("%s: --%s=%s, but the container's port is %d", pod, flag, flags[flag], port)
			}
		}
		if host, _, _ := net.SplitHostPort(flags["advertise"]); host != podFields(ordinal)["status.podIP"] {
			t.Errorf("%s: --advertise=%s, want the pod's IP (a name may not resolve yet when the node starts)", pod, flags["advertise"])
		}
		if want := fmt.Sprintf("https://%s.%s.%s.svc:%d", pod, headless.Name, namespace, apiPort); flags["advertise-api"] != want {
			t.Errorf("%s: --advertise-api=%s, want %s", pod, flags["advertise-api"], want)
		}
	}
	if m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget: maxUnavailable %v, want 1", m.pdb.Spec.MaxUnavailable)
	}
	if sel, err := metav1.LabelSelectorAsSelector(m.pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pods (%v)", m.pdb.Spec.Selector, err)
	}
}

// TestPodIsLockedDown: non-root (the Dockerfile's user), a read-only root
// file system, no privilege escalation, no capabilities, secrets mounted
// read-only where the flags read them, the data on the claim's volume.
func TestPodIsLockedDown(t *testing.T) {
	m := load(t)
	spec, c := m.sts.Spec.Template.Spec, m.container(t)
	psc := spec.SecurityContext
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindSubmatch(df)
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || user == nil ||
		strconv.FormatInt(*psc.RunAsUser, 10) != string(user[1]) || psc.FSGroup == nil {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser the Dockerfile's USER %s, an fsGroup", psc, user)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("want the RuntimeDefault seccomp profile")
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want a read-only root, no privilege escalation, every capability dropped", sc)
	}

	flags := flagsOf(t, expandArgs(t, c, podFields(0)))
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	claims := map[string]bool{}
	for _, pvc := range m.sts.Spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
		if pvc.Spec.Resources.Requests.Storage().IsZero() {
			t.Errorf("volumeClaimTemplate %s asks for no storage", pvc.Name)
		}
	}
	// mountOf is the mount holding path, and the file's path in it.
	mountOf := func(path string) (corev1.VolumeMount, string) {
		for _, vm := range c.VolumeMounts {
			if rel, ok := strings.CutPrefix(path, vm.MountPath+"/"); ok || path == vm.MountPath {
				return vm, rel
			}
		}
		t.Fatalf("%s is on no volume: the root file system is read-only", path)
		return corev1.VolumeMount{}, ""
	}
	if vm, _ := mountOf(flags["data-dir"]); !claims[vm.Name] || vm.MountPath != flags["data-dir"] {
		t.Errorf("--data-dir=%s is not the mount of a volumeClaimTemplate (mount %s)", flags["data-dir"], vm.Name)
	}
	for _, flag := range []string{"auth-file", "tls-cert", "tls-key", "raft-tls-cert", "raft-tls-key", "raft-tls-ca"} {
		vm, file := mountOf(flags[flag])
		v, ok := volumes[vm.Name]
		if !ok || v.Secret == nil || !vm.ReadOnly {
			t.Errorf("--%s=%s: want it on a read-only mount of a Secret (mount %s)", flag, flags[flag], vm.Name)
			continue
		}
		if !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == file }) {
			t.Errorf("--%s=%s: Secret %s puts no item at %s", flag, flags[flag], v.Secret.SecretName, file)
		}
	}
}

// leasesAnnotation names how many held leases the memory request is for.
const leasesAnnotation = "leasehold.dev/sized-for-leases"

// TestResourcesFitTheLeases: the memory request holds the node (28 MiB
// idle) and the annotated number of leases at the README's measured peak
// of 1.23 KiB each, the limit is above it, and there is no CPU limit (a
// throttled leader renews late).
func TestResourcesFitTheLeases(t *testing.T) {
	m := load(t)
	c := m.container(t)
	leases, err := strconv.Atoi(m.sts.Annotations[leasesAnnotation])
	if err != nil || leases <= 0 {
		t.Fatalf("annotation %s %q: want the lease count the requests are sized for", leasesAnnotation, m.sts.Annotations[leasesAnnotation])
	}
	need := 28<<20 + int64(float64(leases)*1.23*1024)
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if req.Value() < need {
		t.Errorf("memory request %s is below the %d MiB that %d leases need", req, need>>20, leases)
	}
	if lim.Cmp(*req) < 0 {
		t.Errorf("memory limit %s is below the request %s", lim, req)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit: throttling pauses the leader's renewals and expiries")
	}
	if c.Resources.Requests.Cpu().Cmp(resource.MustParse("100m")) < 0 {
		t.Errorf("cpu request %s: too little for a node that renews leases", c.Resources.Requests.Cpu())
	}
}

// leaseholdBin is $LEASEHOLD_BIN, or the binary built from this checkout.
func leaseholdBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LEASEHOLD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "leasehold")
	if out, err := exec.Command("go", "build", "-C", "../..", "-o", bin, "./cmd/leasehold").CombinedOutput(); err != nil {
		t.Fatalf("build leasehold: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestTheBinaryTakesTheManifest runs the real binary with the container's
// own arguments, its Secrets made as README.md says (make-certs.sh, an
// auth file from `leasehold auth token`) and mounted where the manifest
// mounts them, on loopback ports in place of the container's: serve must
// accept every flag, answer the liveness probe with 200 and the readiness
// probe as a node without a quorum does (503: its peers' names do not
// resolve here) without a token, as the kubelet sends none. Then the
// certificates: raft.crt names --raft-tls-server-name, and api.crt serves
// the client Service's name and every --advertise-api host.
func TestTheBinaryTakesTheManifest(t *testing.T) {
	m := load(t)
	c, spec := m.container(t), m.sts.Spec.Template.Spec
	bin := leaseholdBin(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if out, err := exec.Command("sh", "make-certs.sh", namespace, certs).CombinedOutput(); err != nil {
		t.Fatalf("make-certs.sh: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "auth", "token", "ops", "--role", "admin", "-o", "json").Output()
	var tok struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err != nil || json.Unmarshal(out, &tok) != nil {
		t.Fatalf("leasehold auth token: %v\n%s", err, out)
	}
	secrets := map[string]map[string]string{ // Secret -> key -> local file
		"leasehold-auth": {"auth.json": filepath.Join(dir, "auth.json")},
		"leasehold-tls":  {},
	}
	if err := os.WriteFile(secrets["leasehold-auth"]["auth.json"], []byte(`{"tokens":[`+string(tok.Entry)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "raft.crt", "raft.key", "api.crt", "api.key"} {
		secrets["leasehold-tls"][f] = filepath.Join(certs, f)
	}

	// Each mount becomes a directory here, a Secret's items in it.
	local := map[string]string{} // mount path -> directory
	for _, vm := range c.VolumeMounts {
		d := filepath.Join(dir, "mounts", vm.Name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		local[vm.MountPath] = d
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			for _, item := range v.Secret.Items {
				src, ok := secrets[v.Secret.SecretName][item.Key]
				if !ok {
					t.Fatalf("Secret %s key %s: README.md makes no such key", v.Secret.SecretName, item.Key)
				}
				b, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, item.Path), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ports := map[string]string{} // container port -> loopback port
	for _, p := range c.Ports {
		ports[strconv.Itoa(int(p.ContainerPort))] = strconv.Itoa(freePort(t))
	}
	fields := podFields(0)
	fields["status.podIP"] = "127.0.0.1"
	var args []string
	for _, a := range expandArgs(t, c, fields) {
		a = strings.ReplaceAll(a, "0.0.0.0:", "127.0.0.1:")
		for from, to := range ports {
			a = strings.ReplaceAll(a, ":"+from, ":"+to)
		}
		for mount, d := range local {
			a = strings.ReplaceAll(a, "="+mount, "="+d)
		}
		args = append(args, a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	node := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	node.Stderr = &stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- node.Wait() }()

	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // as the kubelet probes
	probe := func(p *corev1.Probe) (int, error) {
		g := p.HTTPGet
		if g == nil {
			return 0, fmt.Errorf("not an httpGet probe")
		}
		port := ports[strconv.Itoa(int(containerPort(t, c, g.Port.String())))]
		resp, err := hc.Get(strings.ToLower(string(g.Scheme)) + "://127.0.0.1:" + port + g.Path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := probe(c.LivenessProbe)
		if err == nil && code == http.StatusOK {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("serve with the manifest's arguments exited: %v\n%s\nargs: %q", err, stderr.String(), args)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("liveness probe %s: %d, %v after 30s\n%s", c.LivenessProbe.HTTPGet.Path, code, err, stderr.String())
		}
	}
	if code, err := probe(c.ReadinessProbe); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("readiness probe %s: %d, %v; want 503 from a node without a quorum (404 would be no such path)",
			c.ReadinessProbe.HTTPGet.Path, code, err)
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if g := p.HTTPGet; g != nil && (g.Scheme == corev1.URISchemeHTTPS) != (flagsOf(t, c.Args)["tls-cert"] != "") {
			t.Errorf("probe %s: scheme %s, but the API serves TLS: %v", g.Path, g.Scheme, flagsOf(t, c.Args)["tls-cert"] != "")
		}
	}

	// The certificates carry the names in use.
	flags := flagsOf(t, expandArgs(t, c, podFields(0)))
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(certs, "ca.crt")))
	verify := func(file, name string, usage x509.ExtKeyUsage) {
		t.Helper()
		cert := readCert(t, filepath.Join(certs, file))
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s for %s: %v", file, name, err)
		}
	}
	verify("raft.crt", flags["raft-tls-server-name"], x509.ExtKeyUsageServerAuth)
	verify("raft.crt", flags["raft-tls-server-name"], x509.ExtKeyUsageClientAuth)
	for _, svc := range m.services {
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			verify("api.crt", svc.Name+"."+namespace+".svc", x509.ExtKeyUsageServerAuth)
		}
	}
	for ordinal := range int(*m.sts.Spec.Replicas) {
		f := flagsOf(t, expandArgs(t, c, podFields(ordinal)))
		host, _, _ := net.SplitHostPort(strings.TrimPrefix(f["advertise-api"], "https://"))
		verify("api.crt", host, x509.ExtKeyUsageServerAuth)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cert
}
