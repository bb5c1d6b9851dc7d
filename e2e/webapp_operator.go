//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/support"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The WebApp operator's fixed names, from examples/webapp/config (namePrefix
// webapp-, namespace webapp-system) and its main.go.
const (
	operatorNamespace      = "webapp-system"
	operatorServiceAccount = "webapp-controller-manager"
	operatorUser           = "system:serviceaccount:" + operatorNamespace + ":" + operatorServiceAccount
	operatorDeployment     = "webapp-controller-manager"
	leaseName              = "webapp-operator.apps.example.com"
	webappCRD              = "webapps.apps.example.com"
)

func init() {
	// klient's Resources use client-go's scheme.
	utilruntime.Must(webappv1.AddToScheme(scheme.Scheme))
}

// operatorMode says how the suite runs the WebApp operator (E2E_OPERATOR).
type operatorMode string

const (
	// modeProcess runs the operator as host processes, as `make demo`
	// does: config/local installs the CRD, the generated RBAC and webhook
	// configurations pointing at https://127.0.0.1:9443. The default for
	// the kwok and existing providers (the apiserver must run on this host).
	modeProcess operatorMode = "process"
	// modeDeployment runs the operator image in the cluster, as `make
	// deploy` does (config/default). The default for the kind provider.
	// Features that start, stop and kill operator processes skip.
	modeDeployment operatorMode = "deployment"
)

// deployedImage is the operator image config/default deploys
// (config/manager/kustomization.yaml), which `make docker-build` builds
// (IMG). In deployment mode the suite builds it and loads it into kind,
// unless E2E_OPERATOR_IMAGE names another, existing image; then config/default
// is deployed with that image instead.
const (
	deployedImageName = "reconcilekit/webapp-operator"
	deployedImage     = deployedImageName + ":dev"
)

// webappOperator is the system under test: the WebApp operator installed
// into the suite cluster and running for the whole suite. Features read
// it through the package variable operator.
//
// Guarantees:
//   - The operator authenticates as its ServiceAccount
//     (webapp-system/webapp-controller-manager) with a token, never with
//     the suite's admin credentials, so it has exactly the generated RBAC.
//   - After Setup the primary instance leads and its webhooks admit.
//   - Teardown stops every process it started, also after failures, and
//     copies their logs to the artifacts directory when anything failed.
type webappOperator struct {
	h     *Harness
	mode  operatorMode
	image string // deployment mode

	workDir      string // binary, operator kubeconfig, logs (see makeWorkDir)
	binary       string
	saKubeconfig string       // the ServiceAccount's kubeconfig (a token)
	saConfig     *rest.Config // the same, for clients in tests

	mu        sync.Mutex
	processes []*operatorProcess
	// retired are stopped processes that ran under injected faults (the
	// chaos suite's restarted apiserver, its fault proxy): checks of the
	// operator's identity and least privilege skip them, since a
	// restarting apiserver denies requests until its authorizer has
	// synced; their logs are still exported after a failure.
	retired []*operatorProcess
	primary *operatorProcess // process mode: serves the webhooks on primaryWebhookPort
}

// operator is the suite's WebApp operator, set up by TestMain.
var operator *webappOperator

// newWebappOperator reads E2E_OPERATOR and E2E_OPERATOR_IMAGE.
func newWebappOperator(h *Harness) (*webappOperator, error) {
	o := &webappOperator{h: h, mode: operatorMode(os.Getenv("E2E_OPERATOR")), image: os.Getenv("E2E_OPERATOR_IMAGE")}
	if o.mode == "" {
		o.mode = modeProcess
		if h.opts.Provider == ProviderKind {
			o.mode = modeDeployment
		}
	}
	switch o.mode {
	case modeProcess, modeDeployment:
	default:
		return nil, fmt.Errorf("E2E_OPERATOR=%q: want %q or %q", o.mode, modeProcess, modeDeployment)
	}
	if o.mode == modeProcess && h.opts.Provider == ProviderKind {
		return nil, errors.New("E2E_OPERATOR=process cannot work on kind: its apiserver cannot reach webhooks on the host's 127.0.0.1")
	}
	return o, nil
}

// stage plugs the operator into the harness.
func (o *webappOperator) stage() Stage {
	return Stage{Name: "the WebApp operator (" + string(o.mode) + ")", Setup: o.setup, Teardown: o.teardown}
}

func (o *webappOperator) setup(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	var err error
	if o.mode == modeProcess {
		err = o.setupProcess(setupCtx, cfg)
	} else {
		err = o.setupDeployment(setupCtx, cfg)
	}
	if err != nil {
		return ctx, err
	}
	fmt.Fprintf(os.Stderr, "e2e: the WebApp operator (%s) is up in %v\n", o.mode, time.Since(start).Round(time.Second))
	return ctx, nil
}

// setupProcess builds the binary, installs config/local, writes the
// ServiceAccount's kubeconfig and starts the primary instance.
func (o *webappOperator) setupProcess(ctx context.Context, cfg *envconf.Config) error {
	dir, err := o.makeWorkDir()
	if err != nil {
		return err
	}
	o.binary = filepath.Join(dir, "webapp-operator")
	// examples/ is a module of its own (examples/go.mod).
	build := exec.CommandContext(ctx, "go", "build", "-o", o.binary, "./webapp")
	build.Dir = filepath.Join(o.h.opts.RepoRoot, "examples")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./examples/webapp: %w\n%s", err, out)
	}
	if err := o.install(ctx, filepath.Join(o.h.opts.RepoRoot, "examples", "webapp", "config", "local")); err != nil {
		return err
	}
	if err := o.writeServiceAccountKubeconfig(ctx, cfg); err != nil {
		return err
	}
	if o.primary, err = o.newProcess("primary", true); err != nil {
		return err
	}
	if err := o.primary.start(ctx); err != nil {
		return err
	}
	if err := o.waitLeading(ctx, o.primary, leadTimeout); err != nil {
		return err
	}
	return o.waitWebhookServing(ctx, cfg)
}

// setupDeployment builds and loads the image (unless E2E_OPERATOR_IMAGE
// names one), deploys config/default with that image and waits for the
// rollout and the webhooks.
func (o *webappOperator) setupDeployment(ctx context.Context, cfg *envconf.Config) error {
	config := filepath.Join(o.h.opts.RepoRoot, "examples", "webapp", "config", "default")
	if o.image == "" {
		// make docker-build
		o.image = deployedImage
		if err := dockerBuild(ctx, o.h.opts, o.h.opts.RepoRoot, "examples/webapp/Dockerfile", o.image); err != nil {
			return err
		}
	}
	if loader, ok := o.h.cluster.(support.E2EClusterProviderWithImageLoader); ok {
		// kind load docker-image
		if err := loader.LoadImage(ctx, o.image); err != nil {
			return fmt.Errorf("loading %s into the cluster: %w", o.image, err)
		}
	}
	if o.image != deployedImage {
		config = filepath.Join(o.h.opts.RepoRoot, ".cluster", "e2e-deploy")
		if err := o.writeImageOverlay(config); err != nil {
			return err
		}
	}
	// make deploy
	if err := o.install(ctx, config); err != nil {
		return err
	}
	if _, err := o.h.Kubectl(ctx, "rollout", "status", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--timeout=5m"); err != nil {
		return err
	}
	if err := o.writeServiceAccountKubeconfig(ctx, cfg); err != nil {
		return err
	}
	return o.waitWebhookServing(ctx, cfg)
}

// writeImageOverlay writes, into dir, a kustomization that is config/default
// with the operator image replaced by o.image. In deployment mode dir is
// <repo>/.cluster/e2e-deploy, which git ignores.
func (o *webappOperator) writeImageOverlay(dir string) error {
	base, err := filepath.Rel(dir, filepath.Join(o.h.opts.RepoRoot, "examples", "webapp", "config", "default"))
	if err != nil {
		return err
	}
	name, tag, digest := splitImage(o.image)
	override := "  newTag: " + tag
	if digest != "" {
		override = "  digest: " + digest
	}
	kustomization := fmt.Sprintf(`# Written by the e2e suite (E2E_OPERATOR=deployment): config/default with the image under test.
resources:
- %s
images:
- name: %s
  newName: %s
%s
`, filepath.ToSlash(base), deployedImageName, name, override)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644)
}

// splitImage splits an image reference into name and tag (default
// "latest") or digest.
func splitImage(image string) (name, tag, digest string) {
	if i := strings.Index(image, "@"); i >= 0 {
		return image[:i], "", image[i+1:]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:], ""
	}
	return image, "latest", ""
}

// install applies a kustomization and waits for the CRD to be served.
func (o *webappOperator) install(ctx context.Context, kustomization string) error {
	manifests, err := o.h.Kubectl(ctx, "kustomize", kustomization)
	if err != nil {
		return err
	}
	// config/local's webhooks call https://127.0.0.1:9443; E2E_WEBHOOK_PORT
	// moves them (primaryWebhookPort).
	local := fmt.Sprintf("https://127.0.0.1:%d/", localWebhookPort)
	manifests = strings.ReplaceAll(manifests, local, fmt.Sprintf("https://127.0.0.1:%d/", primaryWebhookPort))
	dir, err := o.makeWorkDir()
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "installed.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o600); err != nil {
		return err
	}
	if _, err := o.h.Kubectl(ctx, "apply", "--server-side", "-f", file); err != nil {
		return err
	}
	_, err = o.h.Kubectl(ctx, "wait", "--for=condition=Established", "crd/"+webappCRD, "--timeout="+establishTimeout)
	return err
}

// writeServiceAccountKubeconfig writes the operator ServiceAccount's
// kubeconfig (serviceAccountKubeconfig) into the work dir.
func (o *webappOperator) writeServiceAccountKubeconfig(ctx context.Context, cfg *envconf.Config) error {
	dir, err := o.makeWorkDir()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "operator.kubeconfig")
	rc, err := serviceAccountKubeconfig(ctx, cfg.Client().RESTConfig(), operatorNamespace, operatorServiceAccount, path)
	if err != nil {
		return err
	}
	o.saKubeconfig, o.saConfig = path, rc
	return nil
}

// serviceAccountKubeconfig mints a token for the ServiceAccount
// namespace/name (TokenRequest, as admin) and writes, to path, a kubeconfig
// holding only admin's server, its CA and that token. It then asks the
// apiserver who that kubeconfig is (SelfSubjectReview), so a kubeconfig
// with any other identity can never reach an operator, and returns its
// config.
func serviceAccountKubeconfig(ctx context.Context, admin *rest.Config, namespace, name, path string) (*rest.Config, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	var token *authenticationv1.TokenRequest
	var last error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// The ServiceAccount was just applied; retry until it is there.
		token, last = cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(2 * 3600))}},
			metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("token for ServiceAccount %s/%s: %w (last: %v)", namespace, name, err, last)
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return nil, fmt.Errorf("the suite kubeconfig's CA: %w", err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["suite"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "suite", AuthInfo: user, Namespace: namespace}
	kc.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "e2e-as-operator"
	cs, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("SelfSubjectReview with %s: %w", path, err)
	}
	if got := review.Status.UserInfo.Username; got != user {
		return nil, fmt.Errorf("the operator kubeconfig %s authenticates as %q, want %q", path, got, user)
	}
	return rc, nil
}

// makeWorkDir creates, once, the directory for the binary, the operator's
// kubeconfig and logs: <repo>/.cluster/<cluster name>-operator, which git
// ignores. A directory left by a killed run is replaced.
func (o *webappOperator) makeWorkDir() (string, error) {
	if o.workDir != "" {
		return o.workDir, nil
	}
	dir := filepath.Join(o.h.opts.RepoRoot, ".cluster", o.h.opts.ClusterName+"-operator")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	o.workDir = dir
	return dir, nil
}

// newProcess prepares (does not start) an operator instance. Only the
// primary serves webhooks, on primaryWebhookPort; every other port is a free one.
func (o *webappOperator) newProcess(name string, webhooks bool) (*operatorProcess, error) {
	if o.mode != modeProcess {
		return nil, fmt.Errorf("operator processes need E2E_OPERATOR=process, not %s", o.mode)
	}
	p := &operatorProcess{
		name: name, binary: o.binary, kubeconfig: o.saKubeconfig, namespace: operatorNamespace,
		webhooks: webhooks, webhookPort: primaryWebhookPort,
		logPath: filepath.Join(o.workDir, "webapp-operator-"+name+".log"),
	}
	var err error
	if !webhooks {
		if p.webhookPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if p.probePort, err = freePort(); err != nil {
		return nil, err
	}
	if p.metricsPort, err = freePort(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.processes = append(o.processes, p)
	o.mu.Unlock()
	return p, nil
}

// controllersStarted is what controller-runtime logs once a manager runs
// its controllers, i.e. once it leads (all of them need leader election).
const controllersStarted = `"msg":"Starting workers","controller":"webapp-controller"`

// leading reports whether p's current run has started the WebApp
// controller: it became the leader.
func (o *webappOperator) leading(p *operatorProcess) bool {
	logs, err := p.logs()
	return err == nil && strings.Contains(logs, controllersStarted)
}

// The operator's leader election runs controller-runtime's defaults
// (main.go sets none): a 15 s lease, renewed within 10 s, tried every 2 s,
// each try jittered by client-go to up to 1.2 retry periods later (tries
// at most 4.4 s apart).
const (
	electionLease    = 15 * time.Second
	electionRetryMax = 2 * time.Second * 22 / 10
)

// takeoverBound is how long after a leader vanished without releasing its
// Lease (SIGKILL) a follower that runs on time holds it: the lease
// duration, counted from the follower's last observation of a renewal (up
// to one try before the kill), and its first try after the expiry:
// 15 s + 2 × 4.4 s = 23.8 s. A released Lease is taken at the next try.
const takeoverBound = electionLease + 2*electionRetryMax

// establishTimeout bounds kubectl's wait for the WebApp CRD to be
// Established, which takes the API server a second or so: a safety net.
const establishTimeout = "5m"

// leadTimeout bounds the wait for a process to lead and start its
// controllers: the takeover, then the sync of its caches, which takes
// seconds on an idle machine and more with every core busy. It is a safety
// net, not a timing assertion (nothing here tests how fast a takeover is):
// takeoverBound plus two minutes for the process, its caches and the API
// server under CI's load; a failure reports the Lease holder or the end
// of the process's log.
const leadTimeout = takeoverBound + 2*time.Minute

// waitLeading waits until p runs the controllers, and the Lease has a
// holder.
func (o *webappOperator) waitLeading(ctx context.Context, p *operatorProcess, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("operator %s exited", p.name)
		}
		return o.leading(p), nil
	})
	if err != nil {
		return fmt.Errorf("operator %s did not start its controllers (lead) within %v: %w; end of its log:\n%s", p.name, timeout, err, tail(p.logPath, 20))
	}
	return nil
}

// waitWebhookServing waits until the mutating webhook defaults a WebApp
// (a server-side dry run: nothing is stored). /readyz alone is not enough:
// the CA bundle must also have been injected into the configurations.
func (o *webappOperator) waitWebhookServing(ctx context.Context, cfg *envconf.Config) error {
	c := cfg.Client().Resources().GetControllerRuntimeClient()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		probe := &webappv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-probe-", Namespace: operatorNamespace},
			Spec:       webappv1.WebAppSpec{Image: "registry.example.com/probe:v1"},
		}
		// Refused connections and untrusted certificates mean "not yet".
		last = c.Create(ctx, probe, client.DryRunAll)
		// Only the webhook defaults resources; the schema cannot.
		return last == nil && probe.Spec.Resources != nil && probe.Spec.Resources.CPU != nil, nil
	})
	if err != nil {
		return fmt.Errorf("the WebApp webhooks do not admit within %v: %w (last: %v)", readyTimeout, err, last)
	}
	return nil
}

// lease returns the operator's leader-election Lease.
func (o *webappOperator) lease(ctx context.Context, cfg *envconf.Config) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := cfg.Client().Resources().Get(ctx, leaseName, operatorNamespace, &l)
	return &l, err
}

// suiteLeaseHolder is the holderIdentity the suite writes into the Lease
// to keep every operator a follower.
const suiteLeaseHolder = "e2e-suite"

// setLeaseHolder writes holder into the Lease with an optimistic lock, as
// a leader elector would: a long lease to hold it, an empty holder and a
// 1s lease to release it (what client-go writes on release).
func (o *webappOperator) setLeaseHolder(ctx context.Context, cfg *envconf.Config, holder string, duration time.Duration) error {
	l, err := o.lease(ctx, cfg)
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = new(holder)
	l.Spec.LeaseDurationSeconds = new(int32(duration / time.Second))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	return cfg.Client().Resources().Update(ctx, l)
}

// restorePrimary brings the operator back to the state every feature
// starts from: only the primary runs, it leads, its webhooks admit. A
// feature that stops, kills or outvotes the primary calls it in its
// Teardown, also after a failure.
func (o *webappOperator) restorePrimary(ctx context.Context, cfg *envconf.Config) error {
	if o.mode != modeProcess {
		return nil
	}
	var errs []error
	if l, err := o.lease(ctx, cfg); err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == suiteLeaseHolder {
		errs = append(errs, o.setLeaseHolder(ctx, cfg, "", time.Second))
	}
	o.mu.Lock()
	others := make([]*operatorProcess, 0, len(o.processes))
	for _, p := range o.processes {
		if p != o.primary {
			others = append(others, p)
		}
	}
	o.mu.Unlock()
	if !o.primary.running() {
		errs = append(errs, o.primary.start(ctx))
	}
	for _, p := range others {
		errs = append(errs, p.stop()) // releases the Lease if it led
	}
	// A killed leader's Lease is taken within takeoverBound, a released
	// one at the next try; leadTimeout adds the process's start.
	errs = append(errs, o.waitLeading(ctx, o.primary, leadTimeout), o.waitWebhookServing(ctx, cfg))
	return errors.Join(errs...)
}

// retire moves stopped processes from processes to retired.
func (o *webappOperator) retire(ps ...*operatorProcess) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.processes = slices.DeleteFunc(o.processes, func(p *operatorProcess) bool { return slices.Contains(ps, p) })
	o.retired = append(o.retired, ps...)
}

// teardown stops every operator process and keeps the logs after a
// failure.
func (o *webappOperator) teardown(ctx context.Context, failed bool) {
	o.mu.Lock()
	processes := append(append([]*operatorProcess(nil), o.processes...), o.retired...)
	o.mu.Unlock()
	for _, p := range processes {
		if err := p.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
	}
	if failed {
		o.exportLogs(ctx, processes)
	}
	if o.workDir != "" {
		if err := os.RemoveAll(o.workDir); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: removing %s: %v\n", o.workDir, err)
		}
	}
}

// exportLogs copies the operator logs to <artifacts>/operator.
func (o *webappOperator) exportLogs(ctx context.Context, processes []*operatorProcess) {
	dir := filepath.Join(o.h.ArtifactsDir(), "operator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: artifacts: %v\n", err)
		return
	}
	for _, p := range processes {
		b, err := os.ReadFile(p.logPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(p.logPath)), b, 0o644)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "e2e: artifacts: operator %s log: %v\n", p.name, err)
		}
	}
	if o.mode == modeDeployment && o.h.Kubeconfig() != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		out, err := o.h.Kubectl(ctx, "logs", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--all-pods", "--prefix", "--tail=-1")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "manager.log"), []byte(out), 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: artifacts: operator logs: %v\n", err)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: operator logs are in %s\n", dir)
}
