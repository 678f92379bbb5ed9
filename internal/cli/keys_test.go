package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db/testdb"
	"anvil/domain/secret"
)

func keyIDOf(t *testing.T, b64 string) string {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(b64)
	kr, err := secret.NewKeyring(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return kr.CurrentID()
}

// TestServeRefusesSecretsOfAKeyItDoesNotHold: every role refuses to start
// on a database whose secrets another key sealed, naming that key and what
// to do; the previous key opens the door; forget-secrets (with --yes, never
// for a held key) erases them with an audit entry and serve starts again.
func TestServeRefusesSecretsOfAKeyItDoesNotHold(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	seedProject(t, env) // a provider token sealed under testKey
	oldID := keyIDOf(t, testKey)
	newKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	newEnv := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + newKey, "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	for _, args := range [][]string{{"serve"}, {"serve", "--role", "web"}, {"worker"}} {
		code, _, stderr := anvil(t, newEnv, "", append(args, "--addr", freeAddr(t))...)
		if code == 0 || !strings.Contains(stderr, "refusing to start") || !strings.Contains(stderr, "key id "+oldID) ||
			!strings.Contains(stderr, "ANVIL_SECRET_KEY_PREVIOUS") || !strings.Contains(stderr, "anvil admin forget-secrets --key-id "+oldID+" --yes") {
			t.Errorf("%v under another key: exit %d, %s", args, code, stderr)
		}
		if strings.Contains(stderr, newKey) || strings.Contains(stderr, testKey) {
			t.Errorf("%v: the refusal echoes a key", args)
		}
	}

	// The old key as the previous one: serve starts.
	withPrev := append(append([]string{}, newEnv...), "ANVIL_SECRET_KEY_PREVIOUS="+testKey)
	addr := freeAddr(t)
	cmd := exec.Command(binary, "serve", "--addr", addr)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, withPrev...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if code, _, stderr := anvil(t, withPrev, "", "admin", "forget-secrets", "--key-id", oldID, "--yes"); code != 1 || !strings.Contains(stderr, "its secrets open") {
		t.Errorf("forget-secrets of a held key: %d %s", code, stderr)
	}

	// Declared lost: without --yes nothing happens; with it, they go.
	if code, _, stderr := anvil(t, newEnv, "", "admin", "forget-secrets", "--key-id", oldID); code != 2 || !strings.Contains(stderr, "--yes is required") {
		t.Errorf("forget-secrets without --yes: %d %s", code, stderr)
	}
	code, out, stderr := anvil(t, newEnv, "", "admin", "forget-secrets", "--key-id", oldID, "--yes")
	if code != 0 || !strings.Contains(out, "erased 1 provider token(s)") {
		t.Fatalf("forget-secrets: %d %s %s", code, out, stderr)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var token, actor string
	if err := db.QueryRow(`SELECT provider_token_enc FROM projects WHERE slug = 'shop'`).Scan(&token); err != nil || token != "" {
		t.Errorf("provider token after forget: %q %v", token, err)
	}
	if err := db.QueryRow(`SELECT actor_email FROM audit_log WHERE kind = 'secrets.forgotten' AND target = $1`, oldID).Scan(&actor); err != nil || actor != "operator (anvil admin)" {
		t.Errorf("audit of the forget: %q %v", actor, err)
	}
	addr = freeAddr(t)
	cmd = exec.Command(binary, "serve", "--addr", addr)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, newEnv...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// TestDevResetDropsTheDemoDatabase: `make clean-demo` (anvil dev --reset)
// drops the demo's own database before it removes the key, and keeps
// everything when the database of that name is not the demo's.
func TestDevResetDropsTheDemoDatabase(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("anvil_demo_reset_%d", time.Now().UnixNano())
	adminExec(t, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	t.Cleanup(func() { adminExec(t, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)") })
	dir := filepath.Join(t.TempDir(), ".anvil")
	addr := freeAddr(t)
	cmd := exec.Command(binary, "dev", "--addr", addr, "--dir", dir, "--database", name)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dev: %v\n%s", err, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := anvil(t, nil, "", "dev", "--reset", "--dir", dir, "--database", name)
	if code != 0 || !strings.Contains(out, "dropped the demo's database") {
		t.Fatalf("reset: %d %s %s", code, out, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the folder stays after the reset: %v", err)
	}
	if databaseExists(t, name) {
		t.Errorf("the demo's database %s stays after the reset", name)
	}

	// A database of that name that the demo did not make is kept, and so
	// is the key: never half a reset.
	other := emptyDatabase(t)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "secret.key"), []byte("k\n"), 0o600)
	code, _, stderr = anvil(t, nil, "", "dev", "--reset", "--dir", dir, "--database", other)
	if code != 1 || !strings.Contains(stderr, "was not made by `make run`") || !strings.Contains(stderr, "nothing was removed") {
		t.Errorf("reset of a foreign database: %d %s", code, stderr)
	}
	if !databaseExists(t, other) {
		t.Errorf("the reset dropped a database that is not the demo's")
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); err != nil {
		t.Errorf("the refused reset removed the key: %v", err)
	}
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}
