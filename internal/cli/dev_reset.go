package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// devReset is `anvil dev --reset` (make clean-demo): it drops the demo's
// database, stops and removes its own cluster, and only then removes the
// folder with the key and the demo login. A key gone while its database
// stays is the lockout that serve now refuses (docs/install.md, "A lost
// key"); so when the database cannot be dropped, nothing is removed.
func devReset(ctx context.Context, dir, name string, stdout, stderr io.Writer) error {
	if u := os.Getenv("ANVIL_DATABASE_URL"); u != "" {
		return fmt.Errorf("ANVIL_DATABASE_URL is set (%s): the demo ran on that database, which a reset does not drop; drop it yourself, then remove %s — nothing was removed", redactURL(u), dir)
	}
	dropped, err := dropDemoDatabase(ctx, devLocalAdmin, name)
	if err != nil {
		return fmt.Errorf("%w — nothing was removed", err)
	}
	if dropped {
		fmt.Fprintf(stdout, "dropped the demo's database %q on 127.0.0.1:5432\n", name)
	}
	data, _ := filepath.Abs(filepath.Join(dir, "pg"))
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		if err := stopOwnCluster(ctx, data, stderr); err != nil {
			return fmt.Errorf("stop the demo's own cluster in %s: %w — nothing else was removed", data, err)
		}
		fmt.Fprintf(stdout, "stopped the demo's own cluster (%s)\n", data)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %s (key, demo login, own cluster): `make run` starts afresh\n", dir)
	return nil
}

// dropDemoDatabase drops database name on the server of admin when it is
// the demo's: marked by ensureDatabase, or (made before the mark) holding
// the demo's login. A server that does not answer has nothing to drop.
func dropDemoDatabase(ctx context.Context, admin, name string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		return false, nil
	}
	defer conn.Close(ctx)
	var exists bool
	var comment string
	err = conn.QueryRow(cctx, `SELECT true, COALESCE(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = $1`, name).Scan(&exists, &comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if comment != devMarker && !holdsDemoLogin(cctx, strings.Replace(admin, "/postgres?", "/"+name+"?", 1)) {
		return false, fmt.Errorf("the database %q on 127.0.0.1:5432 was not made by `make run` (no demo login in it): it is kept; if it is the demo's, drop it yourself (dropdb %s)", name, name)
	}
	if _, err := conn.Exec(cctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return false, fmt.Errorf("drop the demo's database %q: %w", name, err)
	}
	return true, nil
}

func holdsDemoLogin(ctx context.Context, url string) bool {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var demo bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE email = 'demo@anvil.local')`).Scan(&demo); err != nil {
		return false
	}
	return demo
}

// stopOwnCluster stops the cluster of data when it runs (as the postgres
// user when root, as ownCluster started it).
func stopOwnCluster(ctx context.Context, data string, log io.Writer) error {
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
		return nil
	}
	bin, err := findPGBin()
	if err != nil {
		return err
	}
	args := []string{filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err == nil {
			args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
		}
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}
