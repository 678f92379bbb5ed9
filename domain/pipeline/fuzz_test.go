package pipeline

import (
	"errors"
	"testing"
)

// FuzzParse: whatever the file holds, Parse answers a configuration or an
// *Error (never a panic, never another error), and what it accepts plans
// and schedules to the end.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte("steps:\n  a:\n    commands: [x]\n"))
	f.Add([]byte("matrix: {A: [1, 2]}\nsteps: [{name: a, commands: [x], depends_on: []}]\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse([]Source{{Path: ".anvil.yaml", Data: data}})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("not a pipeline error: %T %v", err, err)
			}
			return
		}
		p, err := Build(cfg, PlanOptions{Images: true, Event: EventPush, Branch: "main"})
		if err != nil {
			return
		}
		s := NewScheduler(p)
		for !s.Finished() {
			ds := s.Next()
			if len(ds) == 0 {
				t.Fatal("scheduler stuck on an accepted file")
			}
			for _, d := range ds {
				if d.Run {
					s.Done(d.Index, Failed)
				}
			}
		}
	})
}
