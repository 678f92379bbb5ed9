package main

// The webhooks' figures: verified GitHub pushes through the real public route of
// a running `anvil serve`, across 60 projects from 8 concurrent senders,
// each delivery a new id: p99 from request to queued run (the answer of an
// accepted delivery is sent after the run is committed, so the round trip
// is exactly that) and accepted deliveries per second.
//
// Every project's queue holds at most 20 runs, so the load runs in waves of
// 15 pushes per project (under the cap even with one run active); between
// waves, outside the timed window, every queued run is canceled through the
// private API. queue_full answers (503) are counted separately and never
// counted as accepted, so the figure measures accepted deliveries only.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("webhooks/webhook_push", benchWebhookPush)
}

const (
	whProjects       = 60
	whSenders        = 8
	whPerProjectWave = 15
	whWaves          = 5
)

type whProject struct {
	id, secret string
}

// startWebRole is env.serve with --role web.
func startWebRole(ctx context.Context, env *benchEnv, dbURL string) (*proc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	p := &proc{URL: "http://" + addr, exited: make(chan error, 1)}
	p.cmd = exec.Command(env.Binary, "serve", "--addr", addr, "--role", "web")
	p.cmd.Env = env.env(dbURL)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	if err := p.waitReady(ctx); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// apiJSON calls the private API with a bearer token and decodes the answer.
func apiJSON(ctx context.Context, client *http.Client, method, url, token string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, r)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func benchWebhookPush(ctx context.Context, env *benchEnv) error {
	dbURL, err := env.newDatabase(ctx)
	if err != nil {
		return err
	}
	if _, err := env.run(ctx, dbURL, "", "migrate"); err != nil {
		return err
	}
	token, err := env.bootstrap(ctx, dbURL, "bench", "bench@anvil.test", "correct horse battery")
	if err != nil {
		return err
	}
	// The web tier alone (`anvil serve --role web`): the figure is request
	// → queued run, which is the web tier's work. With workers in the same
	// process on a small machine, every promoted run of the 60 projects
	// spawns a checkout, and that CPU, not the delivery path, dominates.
	p, err := startWebRole(ctx, env, dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * whSenders}}

	projects := make([]whProject, whProjects)
	for i := range projects {
		var proj struct {
			ID string `json:"id"`
		}
		if err := apiJSON(ctx, client, "POST", p.URL+"/api/private/projects", token, map[string]string{
			"slug": fmt.Sprintf("hook-%02d", i), "repo_url": fmt.Sprintf("https://git.example.com/acme/hook-%02d.git", i),
			"default_branch": "main", "run_command": "true",
		}, http.StatusCreated, &proj); err != nil {
			return err
		}
		var hook struct {
			Secret string `json:"secret"`
		}
		if err := apiJSON(ctx, client, "PUT", p.URL+"/api/private/projects/"+proj.ID+"/webhooks/github", token,
			map[string]any{"enabled": true}, http.StatusCreated, &hook); err != nil {
			return err
		}
		projects[i] = whProject{id: proj.ID, secret: hook.Secret}
	}

	var seq atomic.Int64
	send := func(pr whProject) (int, time.Duration, error) {
		n := seq.Add(1)
		sha := fmt.Sprintf("%040x", n)
		body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","before":"%040x","after":"%s","repository":{"clone_url":"https://git.example.com/acme/x.git"}}`, n-1, sha))
		mac := hmac.New(sha256.New, []byte(pr.secret))
		mac.Write(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/api/public/webhooks/"+pr.id+"/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d-%s", n, randomHex(4)))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		var ans struct {
			Outcome string `json:"outcome"`
		}
		err = json.NewDecoder(res.Body).Decode(&ans)
		d := time.Since(start)
		res.Body.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("delivery answer: %w", err)
		}
		if res.StatusCode == http.StatusOK && ans.Outcome != "accepted" {
			return 0, 0, fmt.Errorf("a push to main was answered %q", ans.Outcome)
		}
		return res.StatusCode, d, nil
	}

	// drain cancels every queued run of every project through the API.
	drain := func() error {
		work := make(chan string)
		errc := make(chan error, whSenders)
		var wg sync.WaitGroup
		for range whSenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					// A run may have finished since it was listed (409): fine.
					err := apiJSON(ctx, client, "POST", p.URL+"/api/private/runs/"+id+"/cancel", token, nil, http.StatusAccepted, nil)
					if err != nil && !strings.Contains(err.Error(), ": 409 ") {
						select {
						case errc <- err:
						default:
						}
					}
				}
			}()
		}
		for _, pr := range projects {
			var q struct {
				Queued []struct {
					RunID string `json:"run_id"`
				} `json:"queued"`
			}
			if err := apiJSON(ctx, client, "GET", p.URL+"/api/private/projects/"+pr.id+"/queue", token, nil, http.StatusOK, &q); err != nil {
				close(work)
				wg.Wait()
				return err
			}
			for _, r := range q.Queued {
				work <- r.RunID
			}
		}
		close(work)
		wg.Wait()
		select {
		case err := <-errc:
			return err
		default:
			return nil
		}
	}

	// wave sends perProject pushes to every project from the senders and
	// returns the latencies of accepted deliveries, the queue_full count and
	// the wall time.
	wave := func(perProject int) ([]time.Duration, int, time.Duration, error) {
		work := make(chan whProject)
		var mu sync.Mutex
		var lat []time.Duration
		var full int
		var firstErr error
		var wg sync.WaitGroup
		begin := time.Now()
		for range whSenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for pr := range work {
					status, d, err := send(pr)
					mu.Lock()
					switch {
					case err != nil:
						firstErr = err
					case status == http.StatusOK:
						lat = append(lat, d)
					case status == http.StatusServiceUnavailable:
						full++
					default:
						firstErr = fmt.Errorf("delivery answered %d", status)
					}
					mu.Unlock()
				}
			}()
		}
		for range perProject {
			for _, pr := range projects {
				work <- pr
			}
		}
		close(work)
		wg.Wait()
		return lat, full, time.Since(begin), firstErr
	}

	// Warm-up: connections, prepared plans, the first promotion per project.
	if _, _, _, err := wave(2); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	var all []time.Duration
	var full int
	var busy time.Duration
	for range whWaves {
		lat, f, d, err := wave(whPerProjectWave)
		if err != nil {
			return err
		}
		all, full, busy = append(all, lat...), full+f, busy+d
		if err := drain(); err != nil {
			return err
		}
	}
	sortDurations(all)
	env.report("webhooks", "webhook_push_p99_ms", ms(percentile(all, 99)), 50)
	env.note("webhooks", "webhook_push_p50_ms", ms(percentile(all, 50)))
	env.reportAtLeast("webhooks", "webhook_accepted_per_s", float64(int(float64(len(all))/busy.Seconds())), 1000)
	env.note("webhooks", "webhook_accepted_total", float64(len(all)))
	env.note("webhooks", "webhook_queue_full_503", float64(full))
	return p.stop()
}
