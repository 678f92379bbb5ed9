package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
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

// startWatchdog pings the manager at half its WatchdogSec for as long as
// healthy answers, and stops pinging while it does not: then the manager
// kills and restarts the process once WatchdogSec has passed without one
// (Restart=on-failure). It returns a stop function; without a watchdog
// (WATCHDOG_USEC unset, or meant for another process) it starts nothing.
// WATCHDOG_USEC and WATCHDOG_PID are removed from the environment so that no
// child inherits them.
func startWatchdog(log *slog.Logger, healthy func(context.Context) error) (stop func()) {
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
		failing := false
		for {
			// A check may take at most a quarter of the interval, so that a
			// healthy answer still arrives in time.
			cctx, ccancel := context.WithTimeout(ctx, interval/4)
			err := healthy(cctx)
			ccancel()
			switch {
			case ctx.Err() != nil:
				return
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

// healthCheck is the watchdog's question: does the database answer, and
// does this process still serve HTTP on its own listener (the accept loop
// and the handlers, not only a goroutine that ticks)?
func healthCheck(a *app, addr net.Addr) func(context.Context) error {
	url := "http://" + loopback(addr) + "/healthz"
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	return func(ctx context.Context) error {
		if err := a.db.Pool.Ping(ctx); err != nil {
			return fmt.Errorf("database: %w", err)
		}
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
