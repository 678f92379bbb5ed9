package cli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db/testdb"
)

// emptyDatabase creates a database without any table (not from the
// migrated template) and drops it when the test ends.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "anvil_empty_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	name = regexp.MustCompile(`[^a-z0-9_]`).ReplaceAllString(name, "")
	name += "_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adminExec(t, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)") })
	return name
}

func adminExec(t *testing.T, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Error(err)
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := anvil(t, nil, "", "version")
	first, _, _ := strings.Cut(out, "\n")
	if code != 0 || !strings.HasPrefix(first, "devel") || !strings.Contains(out, "linux/") {
		t.Fatalf("anvil version: %d %q", code, out)
	}
	_, help, _ := anvil(t, nil, "", "--help")
	for _, cmd := range []string{"anvil version", "anvil admin check", "anvil admin backup FILE", "anvil admin restore [--force] FILE"} {
		if !strings.Contains(help, cmd) {
			t.Errorf("anvil --help does not list %q", cmd)
		}
	}
}

// TestNotifyReadyAfterListenerAndWatchdog runs the worker as systemd would
// (Type=notify, WatchdogSec=): READY=1 comes only once the migrations ran
// and the listener answers; WATCHDOG=1 follows at half the interval. While
// the database does not answer the worker says it is not ready (STATUS=,
// /readyz) and WATCHDOG=1 goes on: a database restart never gets the
// worker, and the builds it runs, killed. SIGTERM sends STOPPING=1.
func TestNotifyReadyAfterListenerAndWatchdog(t *testing.T) {
	t.Parallel()
	name := emptyDatabase(t) // serve has to migrate it before it is ready
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the notify socket closed while waiting for %s", what)
			}
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("no notification while waiting for %s", what)
		}
		return ""
	}

	addr := freeAddr(t)
	cmd := exec.Command(binary, "worker", "--addr", addr)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ANVIL_DATABASE_URL=" + testdb.URLFor(name), "ANVIL_SECRET_KEY=" + testKey,
		"ANVIL_LOG_LEVEL=debug", "NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000", "ANVIL_WORK_DIR=" + t.TempDir()}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 4096)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads only what it waits for
			}
		}
		close(lines)
	}()
	waitLog := func(substr string) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("anvil exited before logging %q", substr)
				}
				if strings.Contains(l, substr) {
					return
				}
			case <-deadline:
				t.Fatalf("anvil never logged %q", substr)
			}
		}
	}

	ready := next("READY=1")
	if !strings.Contains(ready, "READY=1") {
		t.Fatalf("first notification %q, want READY=1", ready)
	}
	// At READY the listener is up and the schema current: no waiting.
	res, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("/readyz at READY=1: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz at READY=1: %d", res.StatusCode)
	}
	for i := 0; i < 2; i++ {
		if m := next("WATCHDOG=1"); m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", m)
		}
	}

	// The database stops answering: the worker is not ready, and says so,
	// but the pings go on.
	adminExec(t, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false")
	adminExec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+name+"'")
	for m := next("STATUS=not ready"); !strings.HasPrefix(m, "STATUS=not ready"); m = next("STATUS=not ready") {
		if m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1 or STATUS=not ready", m)
		}
	}
	waitLog("not ready: the database does not answer")
	for i := 0; i < 3; i++ {
		if m := next("WATCHDOG=1 while not ready"); m != "WATCHDOG=1" {
			t.Fatalf("notification %q while the database did not answer, want WATCHDOG=1", m)
		}
	}
	if res, err := http.Get("http://" + addr + "/readyz"); err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database does not answer: %v %v", err, res)
	} else {
		res.Body.Close()
	}
	adminExec(t, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS true")
	for m := next("STATUS=serving"); !strings.HasPrefix(m, "STATUS=serving worker"); m = next("STATUS=serving") {
		if m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1 or STATUS=serving", m)
		}
	}
	waitLog("ready again: the database answers")
	if m := next("WATCHDOG=1 again"); m != "WATCHDOG=1" {
		t.Fatalf("notification %q, want WATCHDOG=1", m)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	for m := next("STOPPING=1"); !strings.Contains(m, "STOPPING=1"); m = next("STOPPING=1") {
		if m != "WATCHDOG=1" {
			t.Fatalf("notification %q before STOPPING=1", m)
		}
	}
	go func() {
		for range lines { // keep the pipe drained until exit
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// TestAdminCheckNamesEachProblem: `anvil admin check` says what is wrong,
// one FAIL line per problem, and exits 1; a good configuration exits 0.
func TestAdminCheckNamesEachProblem(t *testing.T) {
	t.Parallel()
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o600)
	bad := []string{
		"ANVIL_DATABASE_URL=postgres://postgres@127.0.0.1:1/nowhere?connect_timeout=2",
		"ANVIL_SECRET_KEY_FILE=" + filepath.Join(t.TempDir(), "missing.key"),
		"ANVIL_PUBLIC_URL=ftp://anvil.example.com",
		"ANVIL_SANDBOX=docker",
		"ANVIL_WORK_DIR=" + filepath.Join(blocked, "work"), // below a file
	}
	code, out, stderr := anvil(t, bad, "", "admin", "check")
	if code != 1 {
		t.Fatalf("check of a bad configuration: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		`FAIL  settings    ANVIL_PUBLIC_URL must be an http(s) URL`,
		`FAIL  settings    ANVIL_SANDBOX must be bwrap or process, got "docker"`,
		`FAIL  key         ANVIL_SECRET_KEY_FILE cannot be read: open ` + filepath.Dir(strings.TrimPrefix(bad[1], "ANVIL_SECRET_KEY_FILE=")),
		`FAIL  database    cannot connect`,
		`FAIL  work dir    cannot create ` + filepath.Join(blocked, "work"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\nFAIL"); n != 5 {
		t.Errorf("%d FAIL lines, want 5:\n%s", n, out)
	}

	// A database a newer anvil migrated, and a key the data was not sealed with.
	name := testdb.Name(t)
	dbURL := testdb.URLFor(name)
	env := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process",
		"ANVIL_WORK_DIR=" + t.TempDir(), "ANVIL_ADDR=" + freeAddr(t), "ANVIL_PUBLIC_URL=https://anvil.example.com"}
	code, out, _ = anvil(t, env, "", "admin", "check")
	if code != 0 || !strings.Contains(out, "all good") || !strings.Contains(out, "ok    schema      current") {
		t.Fatalf("check of a good configuration: exit %d\n%s", code, out)
	}
	seedProject(t, env)
	otherKey := "ANVIL_SECRET_KEY=" + strings.Repeat("A", 43) + "="
	code, out, _ = anvil(t, append(env[:1:1], append(env[2:], otherKey)...), "", "admin", "check", "--role", "web")
	if code != 1 || !regexp.MustCompile(`FAIL  key         1 stored secret\(s\) were sealed under key id\(s\) [0-9a-f]{8}, which is not the configured key`).MatchString(out) {
		t.Fatalf("check with another key: exit %d\n%s", code, out)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES ('99991231000000', 99, now())`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = anvil(t, env, "", "admin", "check")
	if code != 1 || !strings.Contains(out, "FAIL  schema      the database is at migration 99991231000000, newer than this anvil's") {
		t.Fatalf("check of a database from a newer anvil: exit %d\n%s", code, out)
	}
}

// seedProject bootstraps an organisation and creates a project with a
// provider token (a sealed secret) through a web tier.
func seedProject(t *testing.T, env []string) {
	t.Helper()
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	_, out, _ := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	var boot map[string]string
	json.Unmarshal([]byte(out), &boot)
	cmd, web, _ := startAnvil(t, env, "serve", "--role", "web", "--addr", freeAddr(t))
	apiCall(t, boot["token"], "POST", "http://"+web+"/api/private/projects", map[string]any{"slug": "shop", "repo_url": "https://git.example/shop.git",
		"default_branch": "main", "run_command": "true", "provider": "github", "provider_repo": "acme/shop", "provider_token": "ghp_seeded"})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// tableSums is each table's row count and a checksum of its rows, the
// same for the same rows in any database.
func tableSums(t *testing.T, dbURL string) map[string]string {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	sums := map[string]string{}
	for _, tb := range tables {
		var n int
		var sum string
		if err := db.QueryRow(`SELECT count(*), coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM `+tb+` t`).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		sums[tb] = fmt.Sprintf("%s rows=%d", sum, n)
	}
	return sums
}

// TestBackupThenRestoreGivesTheSameRows: a backup of a database with data
// restores into an empty database with every row alike; the archive is
// 0600 and holds the manifest first; a non-empty database is refused
// without --force; an archive from a newer schema is refused.
func TestBackupThenRestoreGivesTheSameRows(t *testing.T) {
	t.Parallel()
	src := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + src, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	seedProject(t, env)
	want := tableSums(t, src)
	if want["projects"] == "" || strings.HasSuffix(want["projects"], "rows=0") {
		t.Fatalf("nothing seeded: %v", want)
	}

	file := filepath.Join(t.TempDir(), "anvil.backup")
	code, out, stderr := anvil(t, env, "", "admin", "backup", file)
	if code != 0 || !strings.Contains(out, "wrote "+file) {
		t.Fatalf("backup: exit %d %s %s", code, out, stderr)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("archive mode: %v %v", fi.Mode(), err)
	}
	if code, _, stderr := anvil(t, env, "", "admin", "backup", file); code != 1 || !strings.Contains(stderr, "never replaces another") {
		t.Fatalf("a second backup over the first: exit %d %s", code, stderr)
	}

	dst := testdb.URLFor(emptyDatabase(t))
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	renv := []string{"ANVIL_DATABASE_URL=" + dst, "ANVIL_SECRET_KEY_FILE=" + keyFile}
	code, out, stderr = anvil(t, renv, "", "admin", "restore", file)
	if code != 0 || !strings.Contains(out, "wrote the archive's key to "+keyFile) {
		t.Fatalf("restore: exit %d %s %s", code, out, stderr)
	}
	if got := tableSums(t, dst); !equalMaps(got, want) {
		t.Fatalf("restored rows differ:\n got %v\nwant %v", got, want)
	}
	if b, _ := os.ReadFile(keyFile); strings.TrimSpace(string(b)) != testKey {
		t.Fatalf("restored key %q", b)
	}
	// The restored installation runs with the restored key file.
	code, out, _ = anvil(t, append(renv, "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR="+t.TempDir(), "ANVIL_ADDR="+freeAddr(t)), "", "admin", "check", "--role", "web")
	if code != 0 || !strings.Contains(out, "opens the 1 stored secret(s)") {
		t.Fatalf("check after restore: exit %d\n%s", code, out)
	}

	// Into a database with tables: refused, then replaced with --force.
	code, _, stderr = anvil(t, renv, "", "admin", "restore", file)
	if code != 1 || !strings.Contains(stderr, " is not empty (") || !strings.Contains(stderr, "--force") {
		t.Fatalf("restore into a non-empty database: exit %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, renv, "", "admin", "restore", "--force", file); code != 0 {
		t.Fatalf("restore --force: exit %d %s", code, stderr)
	}
	if got := tableSums(t, dst); !equalMaps(got, want) {
		t.Fatalf("rows after restore --force differ")
	}

	// An archive whose schema is newer than this binary's.
	newer := filepath.Join(t.TempDir(), "newer.backup")
	rewriteManifest(t, file, newer, func(m map[string]any) { m["migration"] = "99991231000000" })
	code, _, stderr = anvil(t, []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(emptyDatabase(t))}, "", "admin", "restore", newer)
	if code != 1 || !strings.Contains(stderr, "the archive is newer than this anvil: its schema is at migration 99991231000000") {
		t.Fatalf("restore of a newer archive: exit %d %s", code, stderr)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// rewriteManifest copies the archive at from to to with its manifest
// changed by edit.
func rewriteManifest(t *testing.T, from, to string, edit func(map[string]any)) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	tr, tw := tar.NewReader(in), tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Name == "manifest.json" {
			var m map[string]any
			json.Unmarshal(body, &m)
			edit(m)
			body, _ = json.Marshal(m)
			h.Size = int64(len(body))
		}
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	if err := os.WriteFile(to, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rewriteDump copies the archive at from to to with its dump changed by
// edit, and the manifest's size and SHA-256 made to match, so that only
// pg_restore can tell.
func rewriteDump(t *testing.T, from, to string, edit func([]byte) []byte) {
	t.Helper()
	in, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(in))
	members := map[string][]byte{}
	var order []*tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		members[h.Name], _ = io.ReadAll(tr)
		order = append(order, h)
	}
	dump := edit(members["database.dump"])
	members["database.dump"] = dump
	var m map[string]any
	json.Unmarshal(members["manifest.json"], &m)
	sum := sha256.Sum256(dump)
	m["dump_sha256"], m["dump_bytes"] = hex.EncodeToString(sum[:]), len(dump)
	members["manifest.json"], _ = json.Marshal(m)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, h := range order {
		h.Size = int64(len(members[h.Name]))
		tw.WriteHeader(h)
		tw.Write(members[h.Name])
	}
	tw.Close()
	if err := os.WriteFile(to, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// restore --force never loses the database: a dump pg_restore refuses —
// garbage, one from a future pg_dump, one cut short in its data — leaves
// every table and row as they were, and the messages name the database
// and count its tables as tables. A backup taken mid-rotation carries the
// previous key, and the restore hands it back.
func TestRestoreForceOfARefusedDumpKeepsEveryTable(t *testing.T) {
	t.Parallel()
	src := testdb.URLFor(testdb.Name(t))
	prevKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	env := []string{"ANVIL_DATABASE_URL=" + src, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	seedProject(t, env)
	file := filepath.Join(t.TempDir(), "anvil.backup")
	code, out, stderr := anvil(t, append(env, "ANVIL_SECRET_KEY_PREVIOUS="+prevKey), "", "admin", "backup", file)
	if code != 0 || !strings.Contains(out, "with its key and ANVIL_SECRET_KEY_PREVIOUS") {
		t.Fatalf("backup: exit %d %s %s", code, out, stderr)
	}
	dst := testdb.URLFor(emptyDatabase(t))
	var dstName string // as PostgreSQL spells it: at most 63 bytes
	if d, err := sql.Open("pgx", dst); err != nil || d.QueryRow("SELECT current_database()").Scan(&dstName) != nil {
		t.Fatal(err)
	} else {
		d.Close()
	}
	renv := []string{"ANVIL_DATABASE_URL=" + dst, "ANVIL_SECRET_KEY=" + testKey}
	code, out, stderr = anvil(t, renv, "", "admin", "restore", file)
	if code != 0 || !strings.Contains(out, "restored "+file+" into database "+dstName) || !strings.Contains(out, prevKey) ||
		!strings.Contains(stderr, "ANVIL_SECRET_KEY_PREVIOUS") {
		t.Fatalf("restore: exit %d %s %s", code, out, stderr)
	}
	want := tableSums(t, dst)

	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		says string
	}{
		{"garbage", func(b []byte) []byte { return bytes.Repeat([]byte("x"), len(b)) }, "cannot be read, nothing was changed"},
		{"a future pg_dump", func(b []byte) []byte { b = bytes.Clone(b); b[5] = 99; return b }, "cannot be read, nothing was changed"},
		{"cut short", func(b []byte) []byte { return b[:len(b)-64] }, "nothing was changed"},
	} {
		bad := filepath.Join(t.TempDir(), "bad.backup")
		rewriteDump(t, file, bad, c.edit)
		code, out, stderr := anvil(t, renv, "", "admin", "restore", "--force", bad)
		t.Logf("%s: %s", c.name, stderr)
		if code != 1 || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, dstName) {
			t.Fatalf("%s: exit %d %s %s", c.name, code, out, stderr)
		}
		if got := tableSums(t, dst); !equalMaps(got, want) {
			t.Fatalf("%s: the database changed:\n got %v\nwant %v", c.name, got, want)
		}
	}
	// A database that refuses the writes themselves (read-only, as a full
	// disk or a role without rights would): psql stops at the first
	// error, pg_restore is stopped, and the drop is rolled back with it.
	admin, err := sql.Open("pgx", testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`ALTER DATABASE ` + pgx.Identifier{dstName}.Sanitize() + ` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = anvil(t, renv, "", "admin", "restore", "--force", file)
	t.Logf("read-only: %s", stderr)
	if code != 1 || !strings.Contains(stderr, "nothing was changed") || !strings.Contains(stderr, "read-only") {
		t.Fatalf("read-only: exit %d %s %s", code, out, stderr)
	}
	if _, err := admin.Exec(`ALTER DATABASE ` + pgx.Identifier{dstName}.Sanitize() + ` RESET default_transaction_read_only`); err != nil {
		t.Fatal(err)
	}
	if got := tableSums(t, dst); !equalMaps(got, want) {
		t.Fatalf("read-only: the database changed")
	}

	// Without --force: refused, the database named, its tables counted
	// as tables and its sequences as sequences.
	code, _, stderr = anvil(t, renv, "", "admin", "restore", file)
	if code != 1 || !regexp.MustCompile(`database `+dstName+` is not empty \(\d+ tables, \d+ sequences?`).MatchString(stderr) {
		t.Fatalf("restore into a non-empty database: exit %d %s", code, stderr)
	}
}

// admin check names a data folder the runs' caches cannot be kept in.
func TestAdminCheckDataDir(t *testing.T) {
	t.Parallel()
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o600)
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process",
		"ANVIL_WORK_DIR=" + t.TempDir(), "ANVIL_ADDR=" + freeAddr(t), "ANVIL_PUBLIC_URL=https://anvil.example.com",
		"ANVIL_DATA_DIR=" + filepath.Join(blocked, "data")}
	code, out, _ := anvil(t, env, "", "admin", "check")
	if code != 1 || !strings.Contains(out, "FAIL  data dir    cannot create "+filepath.Join(blocked, "data")) {
		t.Fatalf("check of a blocked data folder: exit %d\n%s", code, out)
	}
	data := t.TempDir()
	env[len(env)-1] = "ANVIL_DATA_DIR=" + data
	if code, out, _ = anvil(t, env, "", "admin", "check"); code != 0 || !strings.Contains(out, "ok    data dir    "+data+" is writable") {
		t.Fatalf("check of a good data folder: exit %d\n%s", code, out)
	}
}
