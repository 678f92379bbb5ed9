// Package backup writes and reads anvil's backup archives: one file that
// holds everything needed to bring an installation back — the database as
// pg_dump's custom format, the operator key that opens the secrets sealed in
// it, and a manifest that says what made the archive and at which schema
// level (docs/install.md, "Backup and restore").
//
// The archive is a plain tar (the dump is compressed already) written with
// mode 0600 through a temporary file and a rename, so a half-written backup
// never has the final name. Its members come in a fixed order — the
// manifest, the key, the dump — so that a restore reads and judges the
// manifest before it touches anything.
//
// The database password never reaches argv: pg_dump and pg_restore get the
// URL without it and the password in PGPASSWORD, their own environment
// (docs/install.md). pg_dump takes its snapshot in one transaction, so a
// backup of a running installation is consistent.
package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Format is the archive layout's version; a reader refuses a newer one.
const Format = 1

// Member names, in the order they are written.
const (
	manifestName = "manifest.json"
	keyName      = "secret.key"
	previousName = "secret.key.previous"
	dumpName     = "database.dump"
)

// Manifest describes an archive.
type Manifest struct {
	Format int `json:"format"`
	// AnvilVersion is `anvil version` of the binary that wrote it.
	AnvilVersion string `json:"anvil_version"`
	// Migration is the newest migration applied to the database when it
	// was dumped: a restore refuses an archive newer than its binary.
	Migration string `json:"migration"`
	// ServerVersion is the PostgreSQL server's version (SHOW server_version).
	ServerVersion string `json:"server_version"`
	// Database is the dumped database's name, for the operator.
	Database  string    `json:"database"`
	CreatedAt time.Time `json:"created_at"`
	// Key reports whether the archive holds the operator key.
	Key bool `json:"key"`
	// PreviousKey reports whether it also holds ANVIL_SECRET_KEY_PREVIOUS:
	// a backup taken during a key rotation holds secrets sealed under
	// either key, and the archive must open all of them.
	PreviousKey bool `json:"previous_key,omitempty"`
	// DumpSHA256 and DumpBytes let a restore check the dump before using it.
	DumpSHA256 string `json:"dump_sha256"`
	DumpBytes  int64  `json:"dump_bytes"`
}

// ErrNewerArchive means the archive comes from a newer anvil (format or
// schema) than the one reading it.
var ErrNewerArchive = errors.New("backup: the archive is newer than this anvil")

// libpqParams are the connection parameters libpq understands in a URL's
// query; pgx's own (pool_max_conns, statement_cache_capacity, …) would make
// pg_dump refuse the URL.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "passfile": true,
	"channel_binding": true, "connect_timeout": true, "client_encoding": true, "options": true,
	"application_name": true, "fallback_application_name": true, "keepalives": true,
	"keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true, "tcp_user_timeout": true,
	"sslmode": true, "sslnegotiation": true, "sslcompression": true, "sslcert": true, "sslkey": true,
	"sslcertmode": true, "sslpassword": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true,
	"sslsni": true, "requirepeer": true, "require_auth": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true, "gssdelegation": true,
	"gssencmode": true, "service": true, "target_session_attrs": true, "load_balance_hosts": true,
}

// Libpq turns a database URL into what pg_dump and pg_restore are given: the
// URL without its password (and without parameters libpq does not know),
// and the environment that carries the password (PGPASSWORD), so that it
// appears in no process list.
func Libpq(dbURL string) (conn string, env []string, err error) {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("backup: the database URL is not a postgres:// URL")
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		switch {
		case k == "password":
			env = append(env, "PGPASSWORD="+q.Get(k))
			q.Del(k)
		case !libpqParams[k]:
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), env, nil
}

// tool runs pg_dump or pg_restore with the password in its environment;
// its error carries the tool's last lines of stderr (which never hold the
// password: it is not in the URL).
func tool(ctx context.Context, path string, env []string, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "PGCONNECT_TIMEOUT=15")
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if lines := strings.Split(msg, "\n"); len(lines) > 8 {
			msg = strings.Join(lines[len(lines)-8:], "\n")
		}
		if msg == "" {
			msg = err.Error()
		}
		if name := filepath.Base(path); !strings.HasPrefix(msg, name+": ") {
			msg = name + ": " + msg
		}
		return errors.New(msg)
	}
	return nil
}

// Write dumps the database at dbURL with pgDump (a path to pg_dump) and
// writes the archive to path with key and previous (each may be nil) and
// m, whose Format, Key, PreviousKey, DumpSHA256 and DumpBytes it fills in.
// path must not exist: a backup never replaces another.
func Write(ctx context.Context, path, pgDump, dbURL string, key, previous []byte, m Manifest) (Manifest, error) {
	conn, env, err := Libpq(dbURL)
	if err != nil {
		return m, err
	}
	if _, err := os.Lstat(path); err == nil {
		return m, fmt.Errorf("backup: %s exists; a backup never replaces another", path)
	}
	dir := filepath.Dir(path)
	dump, err := os.CreateTemp(dir, ".anvil-dump-*")
	if err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(dump.Name())
	defer dump.Close()
	h := sha256.New()
	if err := tool(ctx, pgDump, env, nil, io.MultiWriter(dump, h), "--format=custom", "--no-password", "--dbname="+conn); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	fi, err := dump.Stat()
	if err != nil {
		return m, err
	}
	m.Format, m.Key, m.PreviousKey = Format, key != nil, previous != nil
	m.DumpSHA256, m.DumpBytes = hex.EncodeToString(h.Sum(nil)), fi.Size()
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if _, err := dump.Seek(0, io.SeekStart); err != nil {
		return m, err
	}

	out, err := os.CreateTemp(dir, ".anvil-backup-*")
	if err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	if err := out.Chmod(0o600); err != nil {
		return m, err
	}
	tw := tar.NewWriter(out)
	add := func(name string, size int64, r io.Reader) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: m.CreatedAt, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(manifestName, int64(len(manifest)), bytes.NewReader(manifest)); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	if key != nil {
		if err := add(keyName, int64(len(key)), bytes.NewReader(key)); err != nil {
			return m, fmt.Errorf("backup: %w", err)
		}
	}
	if previous != nil {
		if err := add(previousName, int64(len(previous)), bytes.NewReader(previous)); err != nil {
			return m, fmt.Errorf("backup: %w", err)
		}
	}
	if err := add(dumpName, fi.Size(), dump); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	if err := tw.Close(); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	if err := out.Sync(); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	if err := out.Close(); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	// A link, not a rename: it fails when path appeared meanwhile.
	if err := os.Link(out.Name(), path); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// Archive is an opened backup: its manifest and key are read, the dump is
// read when restored.
type Archive struct {
	Manifest Manifest
	// Key is the operator key it holds (the key's text as written), nil
	// when it holds none; PreviousKey the previous key, likewise.
	Key         []byte
	PreviousKey []byte
	path        string
}

// maxSmall bounds the manifest and the key, read into memory.
const maxSmall = 1 << 20

// Open reads the archive at path and checks its layout and dump: the
// manifest first, then the key, then a dump whose size and SHA-256 match
// the manifest's.
func Open(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	a := &Archive{path: path}
	tr := tar.NewReader(f)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != manifestName || hdr.Size > maxSmall {
		return nil, fmt.Errorf("backup: %s is not an anvil backup (it does not start with %s)", path, manifestName)
	}
	if err := json.NewDecoder(io.LimitReader(tr, maxSmall)).Decode(&a.Manifest); err != nil {
		return nil, fmt.Errorf("backup: %s: manifest: %w", path, err)
	}
	if a.Manifest.Format > Format {
		return nil, fmt.Errorf("%w: archive format %d, this anvil reads up to %d", ErrNewerArchive, a.Manifest.Format, Format)
	}
	sawDump := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("backup: %s: %w", path, err)
		}
		switch hdr.Name {
		case keyName:
			if hdr.Size > maxSmall {
				return nil, fmt.Errorf("backup: %s: the key is too large", path)
			}
			if a.Key, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("backup: %s: %w", path, err)
			}
		case previousName:
			if hdr.Size > maxSmall {
				return nil, fmt.Errorf("backup: %s: the previous key is too large", path)
			}
			if a.PreviousKey, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("backup: %s: %w", path, err)
			}
		case dumpName:
			h := sha256.New()
			n, err := io.Copy(h, tr)
			if err != nil {
				return nil, fmt.Errorf("backup: %s: %w", path, err)
			}
			if n != a.Manifest.DumpBytes || hex.EncodeToString(h.Sum(nil)) != a.Manifest.DumpSHA256 {
				return nil, fmt.Errorf("backup: %s: the database dump is damaged (its size or SHA-256 differs from the manifest's)", path)
			}
			sawDump = true
		default:
			return nil, fmt.Errorf("backup: %s: unexpected member %q", path, hdr.Name)
		}
	}
	if !sawDump {
		return nil, fmt.Errorf("backup: %s holds no database dump", path)
	}
	if a.Manifest.Key != (a.Key != nil) || a.Manifest.PreviousKey != (a.PreviousKey != nil) {
		return nil, fmt.Errorf("backup: %s: the manifest and the archive disagree about the key", path)
	}
	return a, nil
}

// dump opens the archive's database dump for reading.
func (a *Archive) dump() (io.Reader, io.Closer, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, nil, fmt.Errorf("backup: %w", err)
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("backup: %s: no database dump: %w", a.path, err)
		}
		if hdr.Name == dumpName {
			return tr, f, nil
		}
	}
}

// Check asks pgRestore whether it can read the dump at all (pg_restore
// --list: its table of contents), before anything is changed: a dump from
// a newer pg_dump, or a damaged one, is refused here.
func (a *Archive) Check(ctx context.Context, pgRestore string) error {
	r, c, err := a.dump()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := tool(ctx, pgRestore, nil, r, io.Discard, "--list"); err != nil {
		return fmt.Errorf("restore: the archive's dump cannot be read, nothing was changed: %w", err)
	}
	return nil
}

// Restore loads the archive's dump into the database at dbURL in one
// transaction: all of it or nothing. With clear, dropping the public
// schema is part of that same transaction, so a dump that fails halfway
// (a newer pg_dump, a role that may not create an extension, a full disk)
// leaves the database as it was (docs/install.md, "Backup and restore").
//
// pgRestore (a path to pg_restore) turns the dump into SQL, which psql (a
// path to psql) runs on one connection: BEGIN, the drop, the SQL, and
// COMMIT only once pg_restore has written all of it and exited cleanly.
// psql stops at the first error (ON_ERROR_STOP); either way the
// connection ends inside the transaction, and PostgreSQL rolls it back.
// Objects are owned by the connecting role (--no-owner), as the role that
// made the dump may not exist here.
func (a *Archive) Restore(ctx context.Context, pgRestore, psql, dbURL string, clear bool) error {
	conn, env, err := Libpq(dbURL)
	if err != nil {
		return err
	}
	r, c, err := a.dump()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	script, scriptW := io.Pipe()
	sqlIn, sqlW := io.Pipe()
	restoreErr := make(chan error, 1)
	go func() {
		err := tool(ctx, pgRestore, nil, r, scriptW, "--no-owner", "--no-privileges", "--exit-on-error", "--file=-")
		scriptW.CloseWithError(err)
		restoreErr <- err
	}()
	feedErr := make(chan error, 1)
	go func() {
		err := feed(sqlW, script, clear, restoreErr)
		// Without COMMIT, psql reads EOF inside the transaction: its
		// connection ends, and the transaction with it.
		sqlW.Close()
		feedErr <- err
	}()
	psqlErr := tool(ctx, psql, env, sqlIn, io.Discard, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--no-password", "--file=-", "--dbname="+conn)
	if psqlErr != nil {
		// pg_restore has nobody to write to any more.
		cancel()
	}
	// psql is done: whatever feed still writes or reads fails at once.
	sqlIn.CloseWithError(io.ErrClosedPipe)
	script.CloseWithError(io.ErrClosedPipe)
	fErr := <-feedErr
	if psqlErr != nil {
		return fmt.Errorf("restore: nothing was changed: %w", psqlErr)
	}
	if fErr != nil {
		return fmt.Errorf("restore: nothing was changed: %w", fErr)
	}
	return nil
}

// feed writes the transaction psql runs: BEGIN, the drop when clear, the
// script as pg_restore writes it, and COMMIT only when pg_restore ended
// without an error.
func feed(w io.Writer, script *io.PipeReader, clear bool, restoreErr <-chan error) error {
	head := "BEGIN;\n"
	if clear {
		head += "DROP SCHEMA public CASCADE;\nCREATE SCHEMA public;\n"
	}
	if _, err := io.WriteString(w, head); err != nil {
		return fmt.Errorf("psql stopped reading: %w", err)
	}
	if _, err := io.Copy(w, script); err != nil {
		script.CloseWithError(err)
		if rerr := <-restoreErr; rerr != nil {
			return rerr
		}
		return fmt.Errorf("psql stopped reading: %w", err)
	}
	if err := <-restoreErr; err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\nCOMMIT;\n"); err != nil {
		return fmt.Errorf("psql stopped reading: %w", err)
	}
	return nil
}
