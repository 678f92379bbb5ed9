package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"anvil/db"
	"anvil/domain/secret"
	"anvil/internal/backup"
)

// cmdBackup is `anvil admin backup FILE` (docs/install.md, "Backup and
// restore"): the database through pg_dump, the operator key and a manifest,
// in one archive of mode 0600.
func init() {
	register(&command{name: "admin backup", usage: "FILE", file: "FILE",
		summary: "write the database (pg_dump), the key and a manifest into one archive (0600)",
		about: "Writes one archive (mode 0600; FILE must not exist) holding the database as pg_dump's\n" +
			"custom format — a consistent snapshot, taken while anvil runs — the operator key that opens\n" +
			"the secrets sealed in it, and a manifest (anvil version, schema level, PostgreSQL version).\n" +
			"Keep it as you keep the key: it holds the key. pg_dump (postgresql-client) must be installed\n" +
			"and no older than the server.",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			envFile := envFileFlag(fs)
			return func(ctx context.Context, x *invocation) error {
				return cmdBackup(ctx, x.cfg, x.cerr, *envFile, x.file, x.stdout, x.stderr)
			}
		}})
}

func cmdBackup(ctx context.Context, cfg *Config, cerr error, envFile, file string, stdout, stderr io.Writer) error {
	cfg, cerr = reloadConfig(envFile, cfg, cerr)
	if cerr != nil {
		return cerr
	}
	if err := cfg.validate(true); err != nil {
		return err
	}
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		return errors.New("backup: pg_dump not found: install postgresql-client (of the server's major version or newer)")
	}
	d, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	m := backup.Manifest{AnvilVersion: Version(), CreatedAt: time.Now().UTC().Truncate(time.Second)}
	m.Migration, err = db.Applied(ctx, d)
	if err == nil {
		err = d.SQL.QueryRowContext(ctx, "SELECT current_setting('server_version'), current_database()").Scan(&m.ServerVersion, &m.Database)
	}
	d.Close()
	if err != nil {
		return err
	}
	key := []byte(base64.StdEncoding.EncodeToString(cfg.SecretKey) + "\n")
	var previous []byte
	if cfg.SecretKeyPrevious != nil {
		// Mid-rotation some secrets are still sealed under the previous
		// key: the archive carries it too, or they would not open after a
		// restore (docs/install.md, "Backup and restore").
		previous = []byte(base64.StdEncoding.EncodeToString(cfg.SecretKeyPrevious) + "\n")
	}
	m, err = backup.Write(ctx, file, pgDump, cfg.DatabaseURL, key, previous, m)
	if err != nil {
		return err
	}
	keys := "with its key"
	if m.PreviousKey {
		keys = "with its key and ANVIL_SECRET_KEY_PREVIOUS"
	}
	fmt.Fprintf(stdout, "wrote %s (%s): database %s at migration %s, PostgreSQL %s, anvil %s, %s\n",
		file, humanBytes(m.DumpBytes), m.Database, orNone(m.Migration), m.ServerVersion, m.AnvilVersion, keys)
	fmt.Fprintln(stderr, "the archive holds the operator key: keep it where you keep the key")
	return nil
}

// cmdRestore is `anvil admin restore [--force] FILE`: the archive's database
// into the configured one, which must be empty unless --force, and its key
// where the configuration reads the key from.
func init() {
	register(&command{name: "admin restore", usage: "[--force] FILE", file: "FILE",
		summary: "restore such an archive into an empty database and put its key in place",
		about: "Restores an archive of `anvil admin backup` into the database of ANVIL_DATABASE_URL, in one\n" +
			"transaction. The database must be empty: --force drops everything in its public schema, in the\n" +
			"same transaction, so a dump that cannot be restored leaves the database as it was.\n" +
			"An archive from a newer anvil (a newer schema) is refused. The archive's key is written to\n" +
			"ANVIL_SECRET_KEY_FILE (a different key already there is kept beside it as FILE.before-restore);\n" +
			"without ANVIL_SECRET_KEY_FILE it is printed, unless ANVIL_SECRET_KEY is that key already.\n" +
			"Start anvil afterwards: it applies the migrations newer than the archive's.",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			force := fs.Bool("force", false, "replace whatever the database holds")
			envFile := envFileFlag(fs)
			return func(ctx context.Context, x *invocation) error {
				return cmdRestore(ctx, x.cfg, x.cerr, *force, *envFile, x.file, x.stdout, x.stderr)
			}
		}})
}

func cmdRestore(ctx context.Context, cfg *Config, cerr error, force bool, envFile, file string, stdout, stderr io.Writer) error {
	cfg, cerr = reloadConfig(envFile, cfg, cerr)
	if cerr != nil {
		return cerr
	}
	if err := cfg.validate(false); err != nil {
		return err
	}
	pgRestore, err := exec.LookPath("pg_restore")
	if err != nil {
		return errors.New("restore: pg_restore not found: install postgresql-client (of the archive's server version or newer)")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		return errors.New("restore: psql not found: install postgresql-client (of the archive's server version or newer)")
	}
	a, err := backup.Open(file)
	if err != nil {
		return err
	}
	m := a.Manifest
	newest, err := db.Newest()
	if err != nil {
		return err
	}
	if m.Migration > newest {
		return fmt.Errorf("%w: its schema is at migration %s, this anvil (%s) knows up to %s; restore it with anvil %s or newer",
			backup.ErrNewerArchive, m.Migration, Version(), newest, m.AnvilVersion)
	}
	var key, previous []byte
	if a.Key != nil {
		if key, err = secret.ParseKey(string(a.Key)); err != nil {
			return fmt.Errorf("restore: the archive's key: %w", err)
		}
	}
	if a.PreviousKey != nil {
		if previous, err = secret.ParseKey(string(a.PreviousKey)); err != nil {
			return fmt.Errorf("restore: the archive's previous key: %w", err)
		}
	}

	d, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	var target string
	if err := d.SQL.QueryRowContext(ctx, "SELECT current_database()").Scan(&target); err != nil {
		return fmt.Errorf("restore: read the database's name: %w", err)
	}
	// The dump is read through before anything is touched.
	if err := a.Check(ctx, pgRestore); err != nil {
		return fmt.Errorf("%w (database %s)", err, target)
	}
	rels, err := userRelations(ctx, d)
	if err != nil {
		return err
	}
	clear := len(rels.names) > 0
	if clear && !force {
		return fmt.Errorf("restore: database %s is not empty (%s, such as %s): restore into an empty database, or give --force to replace everything in its public schema",
			target, rels.counts(), strings.Join(rels.names[:min(3, len(rels.names))], ", "))
	}
	if err := a.Restore(ctx, pgRestore, psql, cfg.DatabaseURL, clear); err != nil {
		return fmt.Errorf("%w (database %s)", err, target)
	}
	if clear {
		fmt.Fprintf(stderr, "replaced %s and everything else in the public schema of database %s (--force)\n", rels.counts(), target)
	}
	fmt.Fprintf(stdout, "restored %s into database %s: %s at migration %s, made %s by anvil %s\n",
		file, target, m.Database, orNone(m.Migration), m.CreatedAt.Format(time.RFC3339), m.AnvilVersion)
	if m.Migration < newest {
		fmt.Fprintf(stdout, "anvil applies the migrations after %s when it starts\n", orNone(m.Migration))
	}
	if err := placeKey(cfg, key, stdout, stderr); err != nil {
		return err
	}
	if previous != nil {
		fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(previous))
		fmt.Fprintln(stderr, "the line above is the archive's previous key: the backup was taken during a key rotation, and some secrets are sealed under it;"+
			" set ANVIL_SECRET_KEY_PREVIOUS to it, run `anvil admin rotate-key`, then remove it")
	}
	return nil
}

// placeKey puts the restored key where the configuration reads it, or
// prints it; a different key in its place is kept beside it, never lost.
func placeKey(cfg *Config, key []byte, stdout, stderr io.Writer) error {
	switch {
	case key == nil:
		fmt.Fprintln(stderr, "the archive holds no key: start anvil with the key the backup was made with")
		return nil
	case cfg.SecretKeyFile == "" && cfg.SecretKey != nil && string(cfg.SecretKey) == string(key):
		fmt.Fprintln(stdout, "ANVIL_SECRET_KEY is the archive's key already")
		return nil
	case cfg.SecretKeyFile == "":
		fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
		fmt.Fprintln(stderr, "the line above is the archive's key: set ANVIL_SECRET_KEY to it (or put it in a file named by ANVIL_SECRET_KEY_FILE) before starting anvil")
		return nil
	case cfg.SecretKey != nil && string(cfg.SecretKey) == string(key):
		fmt.Fprintf(stdout, "the key in %s is the archive's key already\n", cfg.SecretKeyFile)
		return nil
	}
	path := cfg.SecretKeyFile
	mode, uid, gid := os.FileMode(0o640), -1, -1
	if fi, err := os.Stat(filepath.Dir(path)); err == nil {
		// A new key file belongs to the one restoring, in the folder's
		// group (root:anvil for /etc/anvil).
		_, gid = ownerOf(fi)
	}
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		uid, gid = ownerOf(fi)
		kept := path + ".before-restore"
		if _, err := os.Lstat(kept); err == nil {
			kept += "." + time.Now().UTC().Format("20060102T150405")
		}
		if err := os.Rename(path, kept); err != nil {
			return fmt.Errorf("restore: keep the key in %s: %w", path, err)
		}
		fmt.Fprintf(stderr, "the key that was in %s is kept in %s\n", path, kept)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".anvil-key-*")
	if err != nil {
		return fmt.Errorf("restore: write the key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("restore: write the key: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if uid >= 0 || gid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return fmt.Errorf("restore: give the key file its owner: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("restore: write the key: %w", err)
	}
	fmt.Fprintf(stdout, "wrote the archive's key to %s\n", path)
	return nil
}

// relations are what a restore finds in a database: names, and how many
// of each kind, so that messages count tables as tables.
type relations struct {
	names  []string
	byKind map[string]int
}

// counts says "12 tables, 3 sequences, 1 view".
func (r relations) counts() string {
	var parts []string
	for _, k := range []struct{ kind, one, many string }{
		{"table", "table", "tables"}, {"view", "view", "views"}, {"sequence", "sequence", "sequences"}, {"other", "other relation", "other relations"},
	} {
		switch n := r.byKind[k.kind]; n {
		case 0:
		case 1:
			parts = append(parts, "1 "+k.one)
		default:
			parts = append(parts, fmt.Sprintf("%d %s", n, k.many))
		}
	}
	return strings.Join(parts, ", ")
}

// userRelations names the tables, views and sequences outside the system
// schemas: a restore goes only into a database without any.
func userRelations(ctx context.Context, d *db.DB) (relations, error) {
	r := relations{byKind: map[string]int{}}
	rows, err := d.SQL.QueryContext(ctx, `SELECT n.nspname || '.' || c.relname, CASE WHEN c.relkind IN ('r', 'p') THEN 'table'
		WHEN c.relkind IN ('v', 'm') THEN 'view' WHEN c.relkind = 'S' THEN 'sequence' ELSE 'other' END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%' ORDER BY c.relkind NOT IN ('r', 'p'), 1`)
	if err != nil {
		return r, fmt.Errorf("restore: list the database's tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, kind string
		if err := rows.Scan(&n, &kind); err != nil {
			return r, err
		}
		r.names = append(r.names, n)
		r.byKind[kind]++
	}
	return r, rows.Err()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// ownerOf is a file's owner and group, -1 where the system does not say.
func ownerOf(fi os.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
