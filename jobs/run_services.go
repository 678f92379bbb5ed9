package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"anvil/domain/pipeline"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// The run's services on its page and in its API (docs/images.md,
// "Services"): each service a pod starts is a row of run_services, from
// starting to ready to stopped (or failed, or canceled), with the end of
// its log, masked as the run's log is. While services run, their logs are
// stored every serviceLogEvery when they grew, so the page follows them.

const serviceLogEvery = time.Second

// recordService stores a service its pod is about to start.
func (ri *runImages) recordService(ctx context.Context, workflow string, s *pipeline.Service) *serviceRec {
	now := time.Now()
	rec := &serviceRec{row: runs.Service{Workflow: workflow, Name: s.Name, Image: s.Image, Ports: []int{},
		Status: runs.ServiceStarting, StartedAt: &now}}
	for _, p := range s.Ports {
		rec.row.Ports = append(rec.row.Ports, p.Number)
	}
	ri.svcMu.Lock()
	defer ri.svcMu.Unlock()
	if ri.dbctx == nil {
		ri.dbctx = context.WithoutCancel(ctx)
		ri.stopWatch, ri.watchDone = make(chan struct{}), make(chan struct{})
		go ri.watch(ri.stopWatch, ri.watchDone)
	}
	ri.svcs = append(ri.svcs, rec)
	if err := ri.w.Logs.StartService(ri.dbctx, ri.run, &rec.row); err != nil {
		ri.w.Log.Warn("store service", "run_id", ri.run.ID, "service", s.Name, "error", err)
	}
	return rec
}

// serviceReady marks a service ready: its ports accept and its
// healthcheck passed.
func (ri *runImages) serviceReady(rec *serviceRec) {
	ri.svcMu.Lock()
	defer ri.svcMu.Unlock()
	now := time.Now()
	rec.row.Status, rec.row.ReadyAt = runs.ServiceReady, &now
	ri.saveLocked(rec)
}

// serviceEnded records why a service never got ready (canceled when the
// run stopped meanwhile); the pod is stopped already, so the services of
// the workflow that were ready are stopped too.
func (ri *runImages) serviceEnded(ctx context.Context, workflow string, rec *serviceRec, err error) {
	ri.svcMu.Lock()
	now := time.Now()
	rec.row.Status, rec.row.FinishedAt = runs.ServiceFailed, &now
	rec.row.Reason = ri.logw.MaskString(err.Error())
	if ctx.Err() != nil || errors.Is(err, sandbox.ErrCanceled) {
		rec.row.Status = runs.ServiceCanceled
		rec.row.Reason = "the run stopped before the service was ready"
	}
	ri.saveLocked(rec)
	ri.svcMu.Unlock()
	ri.settle(workflow, runs.ServiceStopped, fmt.Sprintf("stopped: the service %s never got ready", rec.row.Name))
}

// endedAlone marks failed the ready services of a workflow that ended
// by themselves while its steps ran (before the pod stops them).
func (ri *runImages) endedAlone(workflow string) {
	ri.svcMu.Lock()
	defer ri.svcMu.Unlock()
	for _, rec := range ri.svcs {
		if rec.row.Workflow != workflow || rec.row.Status != runs.ServiceReady || rec.svc == nil {
			continue
		}
		if res, ok := rec.svc.Exited(); ok {
			now := time.Now()
			rec.row.Status, rec.row.FinishedAt = runs.ServiceFailed, &now
			rec.row.Reason = fmt.Sprintf("the service ended by itself (exit %d) while its workflow ran", res.ExitCode)
			ri.saveLocked(rec)
		}
	}
}

// settle ends the workflow's services that are still starting or ready
// with status and reason, their logs stored a last time.
func (ri *runImages) settle(workflow, status, reason string) {
	ri.svcMu.Lock()
	defer ri.svcMu.Unlock()
	for _, rec := range ri.svcs {
		if rec.row.Workflow != workflow || (rec.row.Status != runs.ServiceStarting && rec.row.Status != runs.ServiceReady) {
			continue
		}
		now := time.Now()
		rec.row.Status, rec.row.Reason, rec.row.FinishedAt = status, reason, &now
		ri.saveLocked(rec)
	}
}

// saveLocked stores a service's row with the end of its log, masked.
func (ri *runImages) saveLocked(rec *serviceRec) {
	if rec.svc != nil {
		rec.saved = rec.svc.Written()
		rec.row.Log, rec.row.LogBytes = ri.logw.MaskString(rec.svc.Log()), rec.saved
	}
	if err := ri.w.Logs.UpdateService(ri.dbctx, ri.run, &rec.row); err != nil {
		ri.w.Log.Warn("store service", "run_id", ri.run.ID, "service", rec.row.Name, "error", err)
	}
}

// watch stores the logs of running services that grew, until endWatch.
func (ri *runImages) watch(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(serviceLogEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ri.svcMu.Lock()
		for _, rec := range ri.svcs {
			live := rec.row.Status == runs.ServiceStarting || rec.row.Status == runs.ServiceReady
			if live && rec.svc != nil && rec.svc.Written() != rec.saved {
				rec.saved = rec.svc.Written()
				rec.row.Log, rec.row.LogBytes = ri.logw.MaskString(rec.svc.Log()), rec.saved
				if err := ri.w.Logs.ServiceLog(ri.dbctx, ri.run, &rec.row); err != nil {
					ri.w.Log.Warn("store service log", "run_id", ri.run.ID, "service", rec.row.Name, "error", err)
				}
			}
		}
		ri.svcMu.Unlock()
	}
}

// endWatch stops the watch (when one started) and waits for it.
func (ri *runImages) endWatch() {
	ri.svcMu.Lock()
	stop, done := ri.stopWatch, ri.watchDone
	ri.stopWatch = nil
	ri.svcMu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
