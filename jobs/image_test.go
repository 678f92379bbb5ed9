package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/image/imagetest"
	"anvil/domain/project"
	runs "anvil/domain/run"
	"anvil/domain/runsecret"
	"anvil/jobs/jobstest"
)

func (b *testBundle) imageProject(t *testing.T, slug, repo, command, img string, allow []string) *domain.Project {
	t.Helper()
	p, err := b.projects.Create(context.Background(), b.owner, project.ProjectInput{Slug: &slug, RepoURL: &repo, DefaultBranch: strp("main"),
		RunCommand: &command, NetworkAllow: &allow, RunImage: &img})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A project with an image runs its command in it: a file only the image
// has, none of the host's tools. The digest is recorded on the run; a tag
// moved afterwards changes a new run, not a re-run, which keeps the bytes.
func TestAProjectRunsItsCommandInItsImage(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "one\n"}))
	b := setup(t, options{insecure: []string{reg.Addr}})
	repo, _, _ := gitRepo(t)
	cmd := `cat /opt/version; test -e /usr/bin/git || echo no-host-git; test -e README && echo checkout-here; echo "ws=$CI_WORKSPACE"`
	p := b.imageProject(t, "imaged", repo, cmd, ref, []string{reg.Addr})
	first := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, first.ID)
	if first.Status() != runs.StatusPassed {
		t.Fatalf("run %s:\n%s", first.Status(), log)
	}
	for _, want := range []string{"one\n", "no-host-git\n", "checkout-here\n", "ws=/workspace\n", "image: " + ref + " resolved to sha256:"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log)
		}
	}
	if first.Image == nil || *first.Image != ref || first.ImageDigest == nil || !strings.HasPrefix(*first.ImageDigest, "sha256:") {
		t.Fatalf("image %v digest %v", first.Image, first.ImageDigest)
	}

	reg.Push(t, "tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "two\n"}))
	again, err := b.queue.Rerun(context.Background(), b.owner, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	rerun := b.waitTerminal(t, again.ID, 60*time.Second)
	if log := b.logText(t, rerun.ID); rerun.Status() != runs.StatusPassed || !strings.Contains(log, "one\n") || *rerun.ImageDigest != *first.ImageDigest {
		t.Fatalf("re-run %s (digest %v):\n%s", rerun.Status(), rerun.ImageDigest, log)
	}
	fresh := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, fresh.ID); !strings.Contains(log, "two\n") || *fresh.ImageDigest == *first.ImageDigest {
		t.Fatalf("a new run after the tag moved:\n%s", log)
	}
}

// A registry the project does not list is refused before any request: the
// run fails at once, its log naming the host.
func TestAnImageFromARegistryNotListedFailsTheRunAtOnce(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "tools:1", imagetest.BusyboxImage(t))
	b := setup(t, options{insecure: []string{reg.Addr}})
	repo, _, _ := gitRepo(t)
	p := b.imageProject(t, "unlisted", repo, "echo never", ref, nil)
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusFailed || !strings.Contains(log, "pulling from "+reg.Addr+" is refused: not in this project's network list") || strings.Contains(log, "never") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	if r.ImageDigest != nil {
		t.Fatalf("a refused image was recorded: %v", *r.ImageDigest)
	}
}

// A pipeline whose step runs in an image against a service: the service is
// reached by name once its port accepts and its healthcheck passes, the
// step's image and digest are on the run's steps, and the pod ends with
// the run.
func TestAPipelineStepInAnImageReachesItsService(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	tools := reg.Push(t, "tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "tools one\n"}))
	web := reg.Push(t, "web:1", imagetest.BusyboxImage(t))
	b := setup(t, options{insecure: []string{reg.Addr}})
	file := `services:
  - name: web
    image: ` + web + `
    commands:
      - mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && echo web is up
      - exec httpd -f -p 8080 -h /tmp/www
    ports: [8080]
    healthcheck: {command: "wget -Y off -q -O /dev/null http://web:8080/", interval: 100ms, retries: 30, timeout: 5s}
steps:
  - name: test
    image: ` + tools + `
    commands:
      - cat /opt/version
      - wget -Y off -q -O - http://web:8080/
`
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": file})
	p := b.imageProject(t, "piped", repo.URL, "true", "", []string{reg.Addr})
	r := b.waitTerminal(t, accept(t, b, p).ID, 90*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "tools one") || !strings.Contains(log, "hello-from-web") || !strings.Contains(log, "service web is ready") ||
		!strings.Contains(log, "service web stopped; the end of its log:\nweb is up") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	st := b.steps(t, r.ID)["test"]
	if st.Image != tools || !strings.HasPrefix(st.ImageDigest, "sha256:") {
		t.Fatalf("step %+v", st)
	}
	// The service is the run's own record too (docs/images.md, "Services"):
	// ready, then stopped with its workflow, its log kept apart.
	svc := b.service(t, r.ID, "web")
	if svc.Status != runs.ServiceStopped || svc.Image != web || !strings.HasPrefix(svc.ImageDigest, "sha256:") || len(svc.Ports) != 1 || svc.Ports[0] != 8080 ||
		svc.StartedAt == nil || svc.ReadyAt == nil || svc.FinishedAt == nil || svc.ReadyAt.Before(*svc.StartedAt) || svc.Reason != "" {
		t.Fatalf("service %+v", svc)
	}
	if text, err := b.logs.ServiceText(context.Background(), b.owner.OrgID, r.ID, "web", "", false); err != nil || text != "web is up\n" {
		t.Fatalf("the service's log %q, %v", text, err)
	}
}

// service is the run's service named name.
func (b *testBundle) service(t *testing.T, id uuid.UUID, name string) runs.Service {
	t.Helper()
	ss, err := b.logs.ServicesOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("the run has no service %s: %+v", name, ss)
	return runs.Service{}
}

// A service that never gets ready fails the run with the end of its log.
func TestAServiceThatNeverGetsReadyFailsTheRun(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	img := reg.Push(t, "bb:1", imagetest.BusyboxImage(t))
	b := setup(t, options{insecure: []string{reg.Addr}})
	file := `services:
  - name: db
    image: ` + img + `
    commands: ["echo initdb: the data directory is broken", "sleep 600"]
    healthcheck: {command: "false", interval: 50ms, retries: 3, timeout: 2s}
steps:
  - name: test
    image: ` + img + `
    commands: ["echo never"]
`
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": file})
	p := b.imageProject(t, "unready", repo.URL, "true", "", []string{reg.Addr})
	r := b.waitTerminal(t, accept(t, b, p).ID, 90*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusFailed || !strings.Contains(log, "service db never got ready") || !strings.Contains(log, "initdb: the data directory is broken") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	// Its own record says so, with the reason and its log.
	svc := b.service(t, r.ID, "db")
	if svc.Status != runs.ServiceFailed || !strings.Contains(svc.Reason, "healthcheck failed 3 times") || svc.ReadyAt != nil || svc.FinishedAt == nil ||
		svc.Log != "initdb: the data directory is broken\n" || svc.LogBytes != int64(len(svc.Log)) {
		t.Fatalf("service %+v", svc)
	}
	if _, err := b.logs.ServiceText(context.Background(), b.owner.OrgID, r.ID, "web", "", false); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("an unknown service: %v", err)
	}
}

// A re-run of a pipeline runs each step in the bytes the run it repeats
// ran, even when the tag moved since.
func TestARerunPipelineStepKeepsItsImageDigest(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "one\n"}))
	b := setup(t, options{insecure: []string{reg.Addr}})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": "steps:\n  - name: show\n    image: " + ref + "\n    commands: [cat /opt/version]\n"})
	p := b.imageProject(t, "pinned", repo.URL, "true", "", []string{reg.Addr})
	first := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if first.Status() != runs.StatusPassed {
		t.Fatalf("first: %s\n%s", first.Status(), b.logText(t, first.ID))
	}
	reg.Push(t, "tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "two\n"}))
	again, err := b.queue.Rerun(context.Background(), b.owner, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	rerun := b.waitTerminal(t, again.ID, 60*time.Second)
	log := b.logText(t, rerun.ID)
	if rerun.Status() != runs.StatusPassed || !strings.Contains(log, "one\n") || strings.Contains(log, "two\n") {
		t.Fatalf("re-run %s:\n%s", rerun.Status(), log)
	}
	if a, c := b.steps(t, first.ID)["show"].ImageDigest, b.steps(t, rerun.ID)["show"].ImageDigest; a == "" || a != c {
		t.Fatalf("digests %q / %q", a, c)
	}
}

// What the images support is for: a project's tests run in a toolchain
// image against a Postgres service, on a worker that has neither (a Debian
// root with PostgreSQL 15, cached in ~/.cache/anvil).
func TestAPipelineRunsAgainstAPostgresService(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("pulls a 200 MB image")
	}
	root := imagetest.PostgresRoot(t)
	reg := imagetest.NewRegistry(t)
	pg := reg.Push(t, "postgres:15", imagetest.RootImage(t, root, []string{"PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}))
	b := setup(t, options{insecure: []string{reg.Addr}})
	file := `services:
  - name: postgres
    image: ` + pg + `
    commands:
      - initdb -D /tmp/pgdata -U postgres --auth=trust > /dev/null
      - exec postgres -D /tmp/pgdata -k /tmp -c listen_addresses=127.0.0.1
    ports: [5432]
    healthcheck: {command: "pg_isready -h 127.0.0.1 -U postgres", interval: 200ms, retries: 50, timeout: 5s}
steps:
  - name: test
    image: ` + pg + `
    commands:
      - test ! -e /usr/local/go
      - psql -h postgres -U postgres -tAc 'select 40 + 2'
`
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": file})
	p := b.imageProject(t, "pg", repo.URL, "true", "", []string{reg.Addr})
	r := b.waitTerminal(t, accept(t, b, p).ID, 5*time.Minute)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "42\n") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
}

// A project's image in a registry that answers only with credentials: an
// anonymous pull fails the run naming the refusal; with image_pull_secret
// naming a run secret (user:token) the run passes, a re-run pulls its
// digest with the same credentials, and the secret's value is in no log.
// A secret deleted since fails the run at once, naming it.
func TestAProjectImageFromAPrivateRegistryIsPulledWithItsPullSecret(t *testing.T) {
	t.Parallel()
	const token = "pull-t0ken-of-the-bot"
	reg := imagetest.NewPrivateRegistry(t, "bot", token)
	ref := reg.Push(t, "private/tools:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "opt/version", Body: "private one\n"}))
	b := setup(t, options{insecure: []string{reg.Addr}})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	p := b.imageProject(t, "private-image", repo, "cat /opt/version", ref, []string{reg.Addr})

	anonymous := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, anonymous.ID); anonymous.Status() != runs.StatusFailed || !strings.Contains(strings.ToLower(log), "unauthorized") || strings.Contains(log, "private one") {
		t.Fatalf("an anonymous pull of a private image: run %s:\n%s", anonymous.Status(), log)
	}

	if _, _, err := runsecret.New(b.store).Put(ctx, b.owner, p.ID, "REGISTRY_AUTH", "bot:"+token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.projects.Update(ctx, b.owner, p.ID, project.ProjectInput{ImagePullSecret: strp("REGISTRY_AUTH")}); err != nil {
		t.Fatal(err)
	}
	first := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, first.ID)
	if first.Status() != runs.StatusPassed || !strings.Contains(log, "private one\n") || strings.Contains(log, token) {
		t.Fatalf("a pull with the project's pull secret: run %s:\n%s", first.Status(), log)
	}

	// Emptied, the store must pull the re-run's digest again: with the
	// credentials, or the registry refuses it.
	b.images.Clear()
	again, err := b.queue.Rerun(ctx, b.owner, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	rerun := b.waitTerminal(t, again.ID, 60*time.Second)
	if log := b.logText(t, rerun.ID); rerun.Status() != runs.StatusPassed || !strings.Contains(log, "pulled and unpacked") || strings.Contains(log, token) ||
		rerun.ImageDigest == nil || *rerun.ImageDigest != *first.ImageDigest {
		t.Fatalf("re-run %s (digest %v):\n%s", rerun.Status(), rerun.ImageDigest, log)
	}

	if err := runsecret.New(b.store).Delete(ctx, b.owner, p.ID, "REGISTRY_AUTH"); err != nil {
		t.Fatal(err)
	}
	gone := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, gone.ID); gone.Status() != runs.StatusFailed ||
		!strings.Contains(log, "image_pull_secret REGISTRY_AUTH is not a run secret of this project (docs/images.md)") || strings.Contains(log, "private one") {
		t.Fatalf("a run after its pull secret was deleted: run %s:\n%s", gone.Status(), log)
	}
}
