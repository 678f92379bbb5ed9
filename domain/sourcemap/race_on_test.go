//go:build race

package sourcemap_test

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
