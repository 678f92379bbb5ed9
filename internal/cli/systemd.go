package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Under systemd (Type=notify, docs/install.md) the service tells the
// manager when it is ready — migrations applied, the listener bound, the
// workers started — so that `systemctl start` returns when anvil answers and
// units ordered after it start then; and it feeds the watchdog
// (WatchdogSec=) only while it is healthy, so that a process that hangs is
// restarted. Outside systemd NOTIFY_SOCKET is unset and every call here does
// nothing.

// sdNotify sends state to the service manager, logging a failure to send
// (the manager would then time the start out, which the log explains).
func sdNotify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify", "state", state, "error", err)
	}
}

// health is what the watchdog asks at every tick. live decides the pings:
// the process still serves its own listener. ready only decides what the
// service says about itself (STATUS=, the log): a database that is slow or
// restarting makes the service "not ready", never a restart, which would
// kill the builds a worker is running and cure nothing (docs/install.md,
// "Readiness and the watchdog").
type health struct {
	live  func(context.Context) error
	ready func(context.Context) error
	// status is the STATUS= line of a ready service.
	status string
}

// startWatchdog pings the manager at half its WatchdogSec for as long as
// h.live answers, and stops pinging while it does not: then the manager
// kills and restarts the process once WatchdogSec has passed without one
// (Restart=on-failure). h.ready is asked at the same tick; while it fails
// the pings go on and STATUS= says "not ready". It returns a stop function;
// without a watchdog (WATCHDOG_USEC unset, or meant for another process) it
// starts nothing. WATCHDOG_USEC and WATCHDOG_PID are removed from the
// environment so that no child inherits them.
func startWatchdog(log *slog.Logger, h health) (stop func()) {
	interval, err := daemon.SdWatchdogEnabled(true)
	if err != nil {
		log.Warn("watchdog: cannot read WATCHDOG_USEC", "error", err)
	}
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		failing, notReady := false, false
		for {
			// Each question may take at most a quarter of the interval, and
			// both are asked at once, so that a healthy answer still arrives
			// in time.
			cctx, ccancel := context.WithTimeout(ctx, interval/4)
			readyc := make(chan error, 1)
			go func() { readyc <- h.ready(cctx) }()
			err := h.live(cctx)
			rerr := <-readyc
			ccancel()
			if ctx.Err() != nil {
				return
			}
			switch {
			case rerr != nil && !notReady:
				log.Error("not ready: the database does not answer; the service stays up and its builds run on", "error", rerr)
				sdNotify(log, "STATUS=not ready: the database does not answer")
			case rerr != nil:
				log.Debug("still not ready", "error", rerr)
			case notReady:
				log.Info("ready again: the database answers")
				sdNotify(log, "STATUS="+h.status)
			}
			notReady = rerr != nil
			switch {
			case err != nil:
				// Logged once per spell of ill health, not at every tick.
				if !failing {
					log.Error("watchdog: not healthy, not pinging the service manager", "error", err, "restart_after", interval)
				} else {
					log.Debug("watchdog: still not healthy", "error", err)
				}
				failing = true
			default:
				if failing {
					log.Info("watchdog: healthy again")
				}
				failing = false
				sdNotify(log, daemon.SdNotifyWatchdog)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	log.Info("watchdog armed", "interval", interval)
	return func() { cancel(); <-done }
}

// healthCheck is the watchdog's questions. Live: does this process still
// serve HTTP on its own listener (the accept loop and the handlers, not only
// a goroutine that ticks)? Ready: does the database answer, asked over a
// connection of the watchdog's own — a pool that running jobs hold whole
// would make a healthy database look dead. It returns a close function for
// that connection.
func healthCheck(a *app, addr net.Addr, status string) (health, func()) {
	url := "http://" + loopback(addr) + "/healthz"
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	probe := &dbProbe{dsn: a.cfg.DatabaseURL}
	live := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("http: /healthz answered %d", resp.StatusCode)
		}
		return nil
	}
	return health{live: live, ready: probe.Ping, status: status}, probe.Close
}

// dbProbe is one database connection apart from the pool, made when first
// needed and made again after it fails.
type dbProbe struct {
	dsn  string
	mu   sync.Mutex
	conn *pgx.Conn
}

// Ping connects when there is no connection and pings over it; a failed
// ping drops the connection, so that the next one starts afresh.
func (p *dbProbe) Ping(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.IsClosed() {
		// The pool's own settings (pool_max_conns…) are the pool's: the
		// connection takes the rest of the URL.
		cfg, err := pgxpool.ParseConfig(p.dsn)
		if err != nil {
			return fmt.Errorf("database: %w", err)
		}
		c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
		if err != nil {
			return fmt.Errorf("database: %w", err)
		}
		p.conn = c
	}
	if err := p.conn.Ping(ctx); err != nil {
		p.conn.Close(context.Background())
		p.conn = nil
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Close closes the connection, if any.
func (p *dbProbe) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p.conn.Close(ctx)
		cancel()
		p.conn = nil
	}
}

// loopback is addr with an unspecified host (0.0.0.0, ::) replaced by
// 127.0.0.1, for the process to reach itself (Go's wildcard listeners take
// IPv4 too).
func loopback(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}
