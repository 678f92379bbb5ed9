package main

// The server's figures: cold start, idle memory and the projects page.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

func init() {
	register("server/cold_start", coldStart)
	register("server/idle_rss", idleRSS)
	register("server/projects_page", projectsPage)
}

// coldStart times `anvil serve` from exec to the first 200 from /readyz on
// an already-migrated database, five times.
func coldStart(ctx context.Context, env *benchEnv) error {
	if _, err := env.run(ctx, env.DBURL, "", "migrate"); err != nil {
		return err
	}
	const starts = 5
	var ds []time.Duration
	for range starts {
		begin := time.Now()
		p, err := env.start(env.DBURL)
		if err != nil {
			return err
		}
		if err := p.waitReady(ctx); err != nil {
			_ = p.stop()
			return err
		}
		ds = append(ds, time.Since(begin))
		if err := p.stop(); err != nil {
			return err
		}
	}
	sortDurations(ds)
	env.report("server", "cold_start_to_ready_ms", ms(ds[len(ds)/2]), 2000)
	env.report("server", "cold_start_to_ready_max_ms", ms(ds[len(ds)-1]), 2000)
	return nil
}

// idleRSS reads VmRSS of a serving process after startup and a few requests.
func idleRSS(ctx context.Context, env *benchEnv) error {
	p, err := env.serve(ctx, env.DBURL)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	for range 5 {
		for _, path := range []string{"/healthz", "/readyz", "/login", "/metrics", "/static/app.css"} {
			if _, err := get(http.DefaultClient, p.URL+path); err != nil {
				return err
			}
		}
	}
	// Let the request goroutines and the pool settle.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	mem, err := procStatus(p.Pid())
	if err != nil {
		return err
	}
	env.report("server", "idle_rss_mb", mem["VmRSS"], 60)
	env.note("server", "idle_rss_anon_mb", mem["RssAnon"])
	env.note("server", "idle_rss_file_mb", mem["RssFile"])
	env.note("server", "peak_rss_mb (VmHWM)", mem["VmHWM"])
	if metrics, err := get(http.DefaultClient, p.URL+"/metrics"); err == nil {
		for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines"} {
			if v, ok := gauge(metrics, name); ok {
				if strings.HasSuffix(name, "_bytes") {
					env.note("server", strings.TrimSuffix(name, "_bytes")+"_mb", float64(int(v/(1<<20)*10))/10)
				} else {
					env.note("server", name, v)
				}
			}
		}
	}
	return p.stop()
}

// gauge reads an unlabelled sample from Prometheus text output.
func gauge(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// procStatus returns the kB fields of /proc/<pid>/status in MiB.
func procStatus(pid int) (map[string]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	mem := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		v, kb := strings.CutSuffix(strings.TrimSpace(v), " kB")
		if !ok || !kb {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			mem[k] = float64(int(n/1024*10)) / 10
		}
	}
	if mem["VmRSS"] == 0 {
		return nil, errors.New("no VmRSS in /proc/<pid>/status")
	}
	return mem, nil
}

// projectsPage creates 500 projects through the API, logs in through the
// form and times GET /projects.
func projectsPage(ctx context.Context, env *benchEnv) error {
	const (
		projects = 500
		warmup   = 20
		samples  = 200
		email    = "owner@server.bench"
		password = "a bench password"
	)
	p, err := env.serve(ctx, env.DBURL)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	token, err := env.bootstrap(ctx, env.DBURL, "server", email, password)
	if err != nil {
		return err
	}

	begin := time.Now()
	if err := createProjects(ctx, p.URL, token, projects); err != nil {
		return err
	}
	env.note("server", "create_500_projects_api_ms", ms(time.Since(begin)))

	client, err := loginClient(p.URL, email, password)
	if err != nil {
		return err
	}
	body, err := get(client, p.URL+"/projects")
	if err != nil {
		return err
	}
	if n := strings.Count(body, `data-testid="project-row"`); n != projects {
		return fmt.Errorf("/projects lists %d rows, want %d", n, projects)
	}
	env.note("server", "projects_page_kb", float64(len(body)/1024))
	for range warmup {
		if _, err := get(client, p.URL+"/projects"); err != nil {
			return err
		}
	}
	ds := make([]time.Duration, 0, samples)
	for range samples {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		start := time.Now()
		if _, err := get(client, p.URL+"/projects"); err != nil {
			return err
		}
		ds = append(ds, time.Since(start))
	}
	sortDurations(ds)
	env.note("server", "projects_page_500_p50_ms", ms(percentile(ds, 50)))
	env.report("server", "projects_page_500_p95_ms", ms(percentile(ds, 95)), 20)
	env.note("server", "projects_page_500_p99_ms", ms(percentile(ds, 99)))
	return p.stop()
}

// createProjects posts n projects to the private API with 8 workers.
func createProjects(ctx context.Context, base, token string, n int) error {
	jobs := make(chan int)
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body, _ := json.Marshal(map[string]string{
					"slug":           fmt.Sprintf("project-%03d", i),
					"name":           fmt.Sprintf("Project %03d", i),
					"repo_url":       fmt.Sprintf("https://git.example.com/acme/project-%03d.git", i),
					"default_branch": "main",
					"run_command":    "make test",
				})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/private/projects", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errc <- err
					return
				}
				msg, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusCreated {
					errc <- fmt.Errorf("POST /api/private/projects: %d %s", res.StatusCode, msg)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case jobs <- i:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// loginClient logs in through the form and returns a client with the
// session cookie.
func loginClient(base, email, password string) (*http.Client, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page, err := get(client, base+"/login")
	if err != nil {
		return nil, err
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		return nil, errors.New("no _csrf field on /login")
	}
	res, err := client.PostForm(base+"/login", url.Values{
		"_csrf": {m[1]}, "email": {email}, "password": {password}, "next": {"/"},
	})
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/" || !strings.Contains(string(body), email) {
		return nil, fmt.Errorf("login landed on %s with %d", res.Request.URL, res.StatusCode)
	}
	return client, nil
}

// get fetches url, reads the whole body and insists on 200.
func get(client *http.Client, url string) (string, error) {
	res, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return string(b), nil
}
