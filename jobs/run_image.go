package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain/image"
	"anvil/domain/netpolicy"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// Images is what a worker needs to run commands in images
// (docs/images.md): its store, and the operator's switches for pulls.
type Images struct {
	Store *image.Store
	// AllowPrivate lets pulls reach private addresses
	// (ANVIL_RUNS_ALLOW_PRIVATE, as the runs' own network).
	AllowPrivate bool
	// AllowLoopback lets them reach the worker's own loopback, link-local
	// and metadata addresses (ANVIL_RUNS_ALLOW_LOOPBACK, as the runs'
	// network).
	AllowLoopback bool
	// Insecure are the registries reached over plain HTTP
	// (ANVIL_REGISTRIES_INSECURE).
	Insecure []string
}

// startImage puts a run's command in its image, when it has one: the
// image a re-run inherited (its digest: the same bytes), else the
// project's (run_image, repair_image), resolved now and recorded on the
// run before it starts. The image is pulled under the project's network
// list, with the project's image_pull_secret when it names one (a run
// secret of the run's scope, read from secrets; docs/images.md, "Private
// registries"); a refused pull fails the run at once, naming the host and
// the preset to add. The returned release lets the store evict the image again
// once the run's processes are gone.
func (w *ExecuteRunWorker) startImage(ctx context.Context, run *runs.Run, ref, pullSecret string, secrets map[string]string, list []string, spec *sandbox.Spec, logw *runs.LogWriter) (func(), error) {
	pinned := ""
	if run.Image != nil && run.ImageDigest != nil {
		ref = *run.Image
	}
	if ref == "" {
		return func() {}, nil
	}
	if w.ImageStore == nil || w.ImageStore.Store == nil {
		return nil, errors.New("this worker cannot run images (no image store)")
	}
	if !w.Executor.Sandboxed() {
		return nil, sandbox.ErrImageNeedsBwrap
	}
	compiled, err := netpolicy.Compile(list)
	if err != nil {
		return nil, fmt.Errorf("the network list: %w", err)
	}
	p := &image.Puller{List: compiled, AllowPrivate: w.ImageStore.AllowPrivate, AllowLoopback: w.ImageStore.AllowLoopback, Insecure: w.ImageStore.Insecure}
	switch {
	case pullSecret == "":
	case !run.SecretsAllowed():
		// A fork's run gets none of the project's secrets: its image is
		// pulled anonymously, as a public image still is
		// (docs/images.md, "Private registries").
		logw.Printf("image: this run's code comes from a fork: %s is pulled without the project's image_pull_secret", ref)
	default:
		// The same credentials sign a re-run's pull of its digest.
		if err := pullAuth(p, ref, pullSecret, secrets); err != nil {
			return nil, err
		}
	}
	var digest string
	if run.ImageDigest != nil {
		digest = *run.ImageDigest
		r, err := p.ParseRef(ref)
		if err != nil {
			return nil, err
		}
		pinned = r.Context().Digest(digest).String()
		logw.Printf("image: %s at %s (the bytes of the run this repeats)", ref, digest)
	} else {
		r, err := p.Resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		digest, pinned = r.Digest, r.Pinned
		if err := w.Queue.RecordImage(ctx, run.ID, ref, digest); err != nil {
			return nil, fmt.Errorf("record the image: %w", err)
		}
		run.Image, run.ImageDigest = &ref, &digest
		logw.Printf("image: %s resolved to %s", ref, digest)
	}
	cached := w.ImageStore.Store.Has(digest)
	began := time.Now()
	lease, err := w.ImageStore.Store.Open(ctx, digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, pinned) })
	if err != nil {
		return nil, err
	}
	if !cached {
		logw.Printf("image: pulled and unpacked in %s", time.Since(began).Round(time.Millisecond))
	}
	if lease.Config.User != "" && lease.Config.User != "root" && lease.Config.User != "0" {
		logw.Printf("image: its user %q is not honoured: commands run as the sandbox's one unprivileged user (docs/images.md)", lease.Config.User)
	}
	spec.Image = &sandbox.Image{Root: lease.Root, Env: lease.Config.Env, Volumes: lease.Config.Volumes}
	return func() { _ = lease.Close() }, nil
}

// pullAuth signs p's requests to ref's registry with the run secret named
// pullSecret (a Docker config.json or user:token): a secret the run does
// not have fails the pull before any request.
func pullAuth(p *image.Puller, ref, pullSecret string, secrets map[string]string) error {
	v, ok := secrets[pullSecret]
	if !ok {
		return fmt.Errorf("image_pull_secret %s is not a run secret of this project (docs/images.md)", pullSecret)
	}
	r, err := p.ParseRef(ref)
	if err != nil {
		return err
	}
	p.Auth, err = image.ParseCredentials(v, r.Context().RegistryStr())
	return err
}
