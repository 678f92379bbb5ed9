package web

import (
	"strings"
	"sync"
	"time"
)

// loginLimiter slows password guessing: after loginMaxFailures failed
// logins for one email within loginWindow, further attempts for that email
// are refused (429) until the window has passed, whatever the password.
// It is per process and in memory: a bound on guessing, not an audit log.
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time
}

const (
	loginMaxFailures = 10
	loginWindow      = 15 * time.Minute
)

func (l *loginLimiter) key(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// blocked reports whether the email has used up its attempts, and until when.
func (l *loginLimiter) blocked(email string, now time.Time) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.prune(l.key(email), now)
	if len(recent) >= loginMaxFailures {
		return true, recent[0].Add(loginWindow)
	}
	return false, time.Time{}
}

// failed records a failed attempt.
func (l *loginLimiter) failed(email string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == nil {
		l.failures = map[string][]time.Time{}
	}
	k := l.key(email)
	l.failures[k] = append(l.prune(k, now), now)
	if len(l.failures) > 100000 { // bound the memory an attacker can make us hold
		for key := range l.failures {
			delete(l.failures, key)
			if len(l.failures) <= 50000 {
				break
			}
		}
	}
}

// succeeded forgets the email's failures.
func (l *loginLimiter) succeeded(email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, l.key(email))
}

func (l *loginLimiter) prune(k string, now time.Time) []time.Time {
	ts := l.failures[k]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > loginWindow {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.failures, k)
		return nil
	}
	l.failures[k] = ts
	return ts
}
