package alert_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/domain/alert"
)

// BenchmarkDeliver measures what one delivery costs in CPU, in this
// process (the worker's side, the receiver included) and in the Postgres
// backends of the test database: ten workers at once, like the alerts
// queue, new-incident alerts of 200 incidents to one webhook.
func BenchmarkDeliver(b *testing.B) {
	tb := setup(b)
	ctx := context.Background()
	tb.alerts.PerMinute = 1_000_000
	rcv := newReceiver(b)
	tb.destination(b, alert.KindWebhook, rcv.URL)
	for i := range 4 {
		var raws = make([][]byte, 50)
		for j := range raws {
			raws[j] = feedEvent(fmt.Sprintf("bench %d", i*50+j))
		}
		for _, r := range raws {
			tb.ingest(b, r)
		}
	}
	js := tb.jobs(b)
	pg := pgCPU(b, tb)
	self0, pg0 := selfCPU(), pg()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		var wg sync.WaitGroup
		next := make(chan queued)
		for range alert.QueueConfig.MaxWorkers {
			wg.Go(func() {
				for j := range next {
					if o := tb.alerts.Deliver(ctx, j.Args, 1, j.Created); !o.Done {
						b.Errorf("%+v", o)
					}
				}
			})
		}
		for _, j := range js {
			next <- j
		}
		close(next)
		wg.Wait()
		n += len(js)
	}
	b.StopTimer()
	self, pgc := selfCPU()-self0, pg()-pg0
	b.ReportMetric(float64(self.Microseconds())/float64(n), "go-cpu-µs/delivery")
	b.ReportMetric(float64(pgc.Microseconds())/float64(n), "pg-cpu-µs/delivery")
	b.ReportMetric(0, "ns/op")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pgCPU returns a reader of the CPU time the test database's backends
// have used (those met so far, ended ones included).
func pgCPU(b *testing.B, tb *testBundle) func() time.Duration {
	seen := map[int32]time.Duration{}
	return func() time.Duration {
		conn, err := pgx.ConnectConfig(context.Background(), tb.db.Pool.Config().ConnConfig)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, _ := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		for _, pid := range pids {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			s := string(raw)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			seen[pid] = time.Duration(ut+st) * 10 * time.Millisecond
		}
		var t time.Duration
		for _, d := range seen {
			t += d
		}
		return t
	}
}
