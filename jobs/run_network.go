package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"anvil/domain/network"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// startNetwork gives a run whose project lists hosts its way out: the run's
// egress proxy, started before the sandbox, on a Unix socket beside the
// workspace that the bwrap sandbox's bridge reaches (or, for the process
// executor, on a loopback port that nothing makes the command use). The
// returned stop closes the proxy — its connections end, nothing listens —
// and stores the rest of the record; call it when the run's processes are
// gone (docs/network.md).
func (w *ExecuteRunWorker) startNetwork(ctx context.Context, run *runs.Run, ws string, list []string, spec *sandbox.Spec, logw *runs.LogWriter) (func(), error) {
	if w.Network == nil {
		return nil, errors.New("this worker cannot give runs a network")
	}
	n := &sandbox.Network{}
	var l net.Listener
	var err error
	if w.Executor.Sandboxed() {
		if w.Bridge == nil {
			return nil, errors.New("the network bridge is not installed on this worker")
		}
		var bridge string
		if bridge, err = w.Bridge(); err != nil {
			return nil, fmt.Errorf("the network bridge: %w", err)
		}
		n.Socket, n.Bridge = ws+".proxy.sock", bridge
		l, err = sandbox.ListenProxySocket(n.Socket)
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			n.Addr = l.Addr().String()
		}
	}
	if err != nil {
		return nil, err
	}
	px, err := w.Network.Start(ctx, network.RunRef{ID: run.ID, OrgID: run.OrgID, ProjectID: run.ProjectID}, list, l, logw)
	if err != nil {
		l.Close()
		return nil, err
	}
	spec.Network = n
	logw.Printf("network: this run may reach %s through anvil's proxy; every connection is listed in its Network section", strings.Join(list, ", "))
	if !w.Executor.Sandboxed() {
		logw.Printf("WARNING: nothing enforces this network list (ANVIL_SANDBOX=process): the proxy variables point the run's tools at anvil's proxy, but the command can reach any address directly")
	}
	return func() {
		if err := px.Close(); err != nil {
			w.Log.Warn("close a run's proxy", "run_id", run.ID, "error", fmt.Sprint(err))
		}
	}, nil
}

// offlineOut is where a run's output goes: its log, through the hint that
// explains a failed name lookup when the run is offline in a sandbox
// (docs/network.md, "A run without a network").
func offlineOut(out io.Writer, offline, repair bool) io.Writer {
	if !offline {
		return out
	}
	whose := "this project's runs have"
	if repair {
		whose = "this project's repair runs have"
	}
	return sandbox.OfflineHint(out, "[anvil] error: "+whose+" no network: add hosts in Edit → Network (a name lookup failed below; a run reaches only the hosts its project lists, through anvil's proxy)")
}
