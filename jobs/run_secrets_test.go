package jobs_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/run"
	"anvil/domain/runsecret"
)

// The command prints the secret whole, split across two writes (with a log
// flush between them), base64-encoded alone and inside a Basic header, and
// URL-encoded. Its text names the variable only: the value is nowhere but
// in the sealed secret.
const secretCommand = `[ ${#DEPLOY_KEY} -eq 24 ] && echo has-the-secret
echo "whole: $DEPLOY_KEY."
printf 'split: %s' "$DEPLOY_KEY" | head -c 12; sleep 0.5; printf '%s' "$DEPLOY_KEY" | tail -c +6; echo
echo "b64: $(printf '%s' "$DEPLOY_KEY" | base64 -w0)"
echo "basic: $(printf 'deploy:%s' "$DEPLOY_KEY" | base64 -w0)"
echo "url: $(printf '%s' "$DEPLOY_KEY" | sed 's|/|%2F|g; s|+|%2B|g; s|&|%26|g; s|=|%3D|g')"
[ -z "$DEPLOY_KEY" ] && echo no-secret-here
true`

const secretValue = "s3cr3t/Deploy+Key&v=42!!"

// TestRunSecretsReachTheCommandAndNeverTheLog gives a run the project's
// secret and checks that the log holds *** wherever the command printed it
// in any form, and that no form of the value is anywhere in the database
// (pg_dump of the whole of it); a run of code from a fork gets no secret.
func TestRunSecretsReachTheCommandAndNeverTheLog(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	p := b.project(t, "secretive", repo, secretCommand, 0)
	secrets := runsecret.New(b.store)
	if _, created, err := secrets.Put(ctx, b.owner, p.ID, "DEPLOY_KEY", secretValue); err != nil || !created {
		t.Fatalf("put: %v %v", created, err)
	}

	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != run.StatusPassed || !strings.Contains(log, "\nhas-the-secret\n") || strings.Contains(log, "\nno-secret-here\n") {
		t.Fatalf("run %s without its secret:\n%s", r.Status(), log)
	}
	forms := []string{secretValue, url.QueryEscape(secretValue), url.PathEscape(secretValue), secretValue[:12], secretValue[5:],
		"s3cr3t%2FDeploy%2BKey%26v%3D42!!",
		base64.StdEncoding.EncodeToString([]byte(secretValue)),
		base64.StdEncoding.EncodeToString([]byte("deploy:" + secretValue))}
	for _, f := range forms {
		if strings.Contains(log, f) {
			t.Errorf("the log shows %q:\n%s", f, log)
		}
	}
	for _, want := range []string{"whole: ***.", "split: ***", "b64: ***", "url: ***", "basic: "} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}

	// A run of a fork's code: accepted as the pull-request acceptance marks it.
	var fork *run.Run
	if err := b.store.WithProject(ctx, p.ID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		var err error
		fork, err = b.queue.AcceptTx(ctx, tx, p, run.AcceptSpec{Trigger: run.TriggerManual, Branch: "main", FromFork: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	fr := b.waitTerminal(t, fork.ID, 60*time.Second)
	flog := b.logText(t, fork.ID)
	if !fr.FromFork || !strings.Contains(flog, "\nno-secret-here\n") || strings.Contains(flog, "\nhas-the-secret\n") || !strings.Contains(flog, "secrets are withheld") {
		t.Fatalf("fork run got the secret:\n%s", flog)
	}

	// Nowhere in the database: the whole of it, as pg_dump writes it.
	var name string
	if err := b.db.Bun.NewRaw(`SELECT current_database()`).Scan(ctx, &name); err != nil {
		t.Fatal(err)
	}
	dump, err := exec.CommandContext(ctx, "pg_dump", "--no-owner", testdb.URLFor(name)).Output()
	if errors.Is(err, exec.ErrNotFound) {
		t.Skipf("pg_dump is not installed: %v", err)
	}
	if err != nil { // installed but failing: the check must not pass unseen
		t.Fatalf("pg_dump: %v", err)
	}
	if !strings.Contains(string(dump), "DEPLOY_KEY") || !strings.Contains(string(dump), "whole: ***.") {
		t.Fatal("the dump lacks the secret's name or the masked log: not the test's database?")
	}
	for _, f := range forms {
		if strings.Contains(string(dump), f) {
			t.Errorf("pg_dump holds %q", f)
		}
	}
}

// TestRunSecretsNeverInTheProcessList: while a run with a secret sleeps,
// no process's command line on the host holds the value (bubblewrap lives
// for the whole run; anything in its argv is in /proc/PID/cmdline, readable
// by every local user). In both executor modes.
func TestRunSecretsNeverInTheProcessList(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bwrap", "process"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{mode: mode})
			ctx := context.Background()
			repo, _, _ := gitRepo(t)
			p := b.project(t, "argv-"+mode, repo, `[ ${#DEPLOY_KEY} -eq 24 ] && echo has-the-secret; sleep 3`, 0)
			if _, _, err := runsecret.New(b.store).Put(ctx, b.owner, p.ID, "DEPLOY_KEY", secretValue); err != nil {
				t.Fatal(err)
			}
			id := accept(t, b, p).ID
			waitFor(t, 60*time.Second, "the command to start", func() bool { return strings.Contains(b.logText(t, id), "has-the-secret") })
			dirs, err := os.ReadDir("/proc")
			if err != nil {
				t.Fatal(err)
			}
			read := 0
			for _, d := range dirs {
				cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
				if err != nil {
					continue // not a process, or gone meanwhile
				}
				read++
				if strings.Contains(string(cmdline), secretValue) {
					t.Errorf("pid %s has the secret in its command line: %q", d.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
				}
			}
			if read < 3 {
				t.Fatalf("read %d command lines: is /proc mounted?", read)
			}
			if r := b.waitTerminal(t, id, 60*time.Second); r.Status() != run.StatusPassed {
				t.Fatalf("run %s:\n%s", r.Status(), b.logText(t, id))
			}
		})
	}
}
