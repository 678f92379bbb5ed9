package jobs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain/image"
	"anvil/domain/netpolicy"
	"anvil/domain/pipeline"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// runImages runs a pipeline's steps in their images and its workflows'
// services in pods (docs/images.md): each step's image resolved, pulled
// under the run's network list (with its image_pull_secret, a run secret)
// and held while it runs; a workflow's pod started before its first step
// and stopped with the run.
type runImages struct {
	w       *ExecuteRunWorker
	run     *runs.Run
	list    []string
	secrets map[string]string
	logw    *runs.LogWriter
	plan    *pipeline.Plan
	ws      string
	base    sandbox.Spec

	mu     sync.Mutex
	pods   map[string]*podState
	leases []*image.Lease
	closed bool
	before map[string]runs.Step // the steps of the run a re-run repeats

	// The run's services as recorded (run_services), and the watch that
	// stores their logs while they run, so the run's page shows them live
	// (docs/images.md, "Services").
	svcMu     sync.Mutex
	svcs      []*serviceRec
	dbctx     context.Context
	stopWatch chan struct{}
	watchDone chan struct{}
}

// serviceRec is one service of the run: its row and, once started, its
// process in the pod; saved is how much of its log the row holds.
type serviceRec struct {
	row   runs.Service
	svc   *sandbox.Service
	saved int64
}

type podState struct {
	once sync.Once
	pod  *sandbox.Pod
	err  error
}

// pinned returns the digest a re-run's step ran in the run it repeats,
// when that step named the same image: a re-run uses the same bytes.
func (ri *runImages) pinned(ctx context.Context, key, ref string) string {
	if ri.run.RerunOf == nil {
		return ""
	}
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.before == nil {
		ri.before = map[string]runs.Step{}
		if p, err := ri.w.Logs.PipelineOf(ctx, *ri.run.RerunOf); err == nil {
			for _, s := range p.Steps {
				ri.before[s.Key] = s
			}
		}
	}
	if s, ok := ri.before[key]; ok && s.Image == ref {
		return s.ImageDigest
	}
	return ""
}

// pull resolves ref (or takes digest, a re-run's) and opens its tree,
// held until the run ends.
func (ri *runImages) pull(ctx context.Context, ref, pullSecret, digest string) (*image.Lease, string, error) {
	compiled, err := netpolicy.Compile(ri.list)
	if err != nil {
		return nil, "", err
	}
	st := ri.w.ImageStore
	p := &image.Puller{List: compiled, AllowPrivate: st.AllowPrivate, AllowLoopback: st.AllowLoopback, Insecure: st.Insecure}
	if pullSecret != "" {
		if err := pullAuth(p, ref, pullSecret, ri.secrets); err != nil {
			return nil, "", err
		}
	}
	var r image.Resolved
	if digest != "" {
		parsed, err := p.ParseRef(ref)
		if err != nil {
			return nil, "", err
		}
		r = image.Resolved{Ref: ref, Digest: digest, Pinned: parsed.Context().Digest(digest).String()}
	} else if r, err = p.Resolve(ctx, ref); err != nil {
		return nil, "", err
	}
	began, cached := time.Now(), st.Store.Has(r.Digest)
	l, err := st.Store.Open(ctx, r.Digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, r.Pinned) })
	if err != nil {
		return nil, "", err
	}
	if !cached {
		ri.logw.Printf("image: %s (%s) pulled and unpacked in %s", ref, r.Digest, time.Since(began).Round(time.Millisecond))
	}
	ri.mu.Lock()
	ri.leases = append(ri.leases, l)
	ri.mu.Unlock()
	return l, r.Digest, nil
}

// launch runs one step: in its image, in its workflow's pod.
func (ri *runImages) launch(ctx context.Context, p *pipeline.Planned, spec sandbox.Spec, out io.Writer) (sandbox.Result, string, error) {
	services := ri.plan.Services[p.Workflow]
	if p.Step.Image == "" {
		if len(services) > 0 {
			return sandbox.Result{}, "", fmt.Errorf("step %s: a workflow with services runs its steps in images (image:)", p.Key)
		}
		res, err := ri.w.Executor.Run(ctx, spec, out)
		return res, "", err
	}
	l, digest, err := ri.pull(ctx, p.Step.Image, p.Step.ImagePullSecret, ri.pinned(ctx, p.Key, p.Step.Image))
	if err != nil {
		fmt.Fprintf(out, "[anvil] %v\n", err)
		return sandbox.Result{}, "", err
	}
	spec.Image = &sandbox.Image{Root: l.Root, Env: l.Config.Env, Volumes: l.Config.Volumes}
	if len(services) > 0 {
		pod, err := ri.pod(ctx, p.Workflow, services)
		if err != nil {
			fmt.Fprintf(out, "[anvil] %v\n", err)
			return sandbox.Result{}, digest, err
		}
		pod.Enter(&spec)
	}
	res, err := ri.w.Executor.Run(ctx, spec, out)
	return res, digest, err
}

// pod starts the workflow's pod once: its services pulled, started, their
// ports accepting and their healthchecks passed.
func (ri *runImages) pod(ctx context.Context, workflow string, services []*pipeline.Service) (*sandbox.Pod, error) {
	ri.mu.Lock()
	if ri.pods == nil {
		ri.pods = map[string]*podState{}
	}
	ps := ri.pods[workflow]
	if ps == nil {
		ps = &podState{}
		ri.pods[workflow] = ps
	}
	ri.mu.Unlock()
	ps.once.Do(func() { ps.pod, ps.err = ri.startPod(ctx, workflow, services) })
	return ps.pod, ps.err
}

func (ri *runImages) startPod(ctx context.Context, workflow string, services []*pipeline.Service) (*sandbox.Pod, error) {
	starter, ok := ri.w.Executor.(sandbox.PodStarter)
	if !ok {
		return nil, sandbox.ErrImageNeedsBwrap
	}
	if ri.w.Bridge == nil {
		return nil, fmt.Errorf("services need anvil's bridge, which this worker has not installed")
	}
	bridge, err := ri.w.Bridge()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(ri.ws), "pod-")
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o711)
	names := make([]string, len(services))
	for i, s := range services {
		names[i] = s.Name
	}
	var n *sandbox.Network
	if ri.base.Network != nil {
		n = &sandbox.Network{Socket: ri.base.Network.Socket}
	}
	pod, err := starter.StartPod(dir, names, bridge, n)
	if err != nil {
		return nil, err
	}
	ri.logw.Printf("services of %s: %s", workflowName(workflow), strings.Join(names, ", "))
	for _, s := range services {
		rec := ri.recordService(ctx, workflow, s)
		l, digest, err := ri.pull(ctx, s.Image, s.ImagePullSecret, "")
		if err != nil {
			pod.Stop()
			ri.serviceEnded(ctx, workflow, rec, err)
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		rec.row.ImageDigest = digest
		env := map[string]string{}
		for _, e := range s.Environment {
			if e.FromSecret != "" {
				env[e.Name] = ri.secrets[e.FromSecret]
			} else {
				env[e.Name] = e.Value
			}
		}
		cmd := strings.Join(s.Commands, "\n")
		if cmd == "" {
			cmd = sandbox.ServiceCommand(l.Config.Entrypoint, l.Config.Cmd)
		}
		spec := sandbox.Spec{Workspace: ri.ws, Command: cmd, Env: env, Limits: ri.base.Limits,
			Image: &sandbox.Image{Root: l.Root, Env: l.Config.Env, Volumes: l.Config.Volumes}}
		svc, err := pod.StartService(ri.w.Executor, s.Name, spec, filepath.Join(dir, s.Name+".log"))
		if err != nil {
			pod.Stop()
			ri.serviceEnded(ctx, workflow, rec, err)
			return nil, err
		}
		ri.svcMu.Lock()
		rec.svc = svc
		ri.svcMu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		for _, port := range s.Ports {
			if err = pod.WaitPort(wctx, svc, port.Number); err != nil {
				break
			}
		}
		if err == nil && s.Healthcheck != nil {
			hc := s.Healthcheck
			check := sandbox.Spec{Workspace: ri.ws, Command: hc.Command, Env: env, Limits: ri.base.Limits,
				Image: &sandbox.Image{Root: l.Root, Env: l.Config.Env}}
			err = pod.Healthcheck(wctx, ri.w.Executor, svc, check, orDefault(hc.Interval, time.Second), orDefault(hc.Timeout, 10*time.Second), max(hc.Retries, 1))
		}
		cancel()
		if err != nil {
			tail := svc.Tail()
			pod.Stop()
			ri.serviceEnded(ctx, workflow, rec, err)
			return nil, fmt.Errorf("service %s never got ready: %w; the end of its log:\n%s", s.Name, err, tail)
		}
		ri.serviceReady(rec)
		ri.logw.Printf("service %s is ready", s.Name)
	}
	return pod, nil
}

func workflowName(w string) string {
	if w == "" {
		return "the pipeline"
	}
	return w
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// close stops the pods and releases the images (once; again is nothing).
func (ri *runImages) close() {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.closed {
		return
	}
	ri.closed = true
	ri.endWatch()
	for workflow, ps := range ri.pods {
		if ps.pod != nil {
			ri.endedAlone(workflow)
			ps.pod.Stop()
			ri.settle(workflow, runs.ServiceStopped, "")
			// Each service's log ends up on the run's page: the end of it,
			// bounded, masked as the run's log is (docs/images.md,
			// "Services").
			for _, s := range ps.pod.Services() {
				if tail := strings.TrimRight(s.Tail(), "\n"); tail != "" {
					ri.logw.Printf("service %s stopped; the end of its log:\n%s", s.Name, tail)
				} else {
					ri.logw.Printf("service %s stopped; its log is empty", s.Name)
				}
			}
		}
	}
	for _, l := range ri.leases {
		_ = l.Close()
	}
}
