package incident

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// This package is the one writer of incident_transitions: a decision or a
// repair outcome records its move in Incidents.move; the feed, which
// creates incidents and counts events on them inside its group
// transaction, takes its moves from Created and Regressed and writes them
// with TransitionsStmt in that transaction (docs/architecture.md,
// "Incident lifecycle").

// Transition is one move of an incident's lifecycle as recorded.
type Transition struct {
	Incident uuid.UUID
	From     *string // nil for the first move of a new incident
	To       string
	Actor    string
	ActorID  string
	Reason   string
	// IntoQueued marks a move the binding's policy made into QUEUED: a
	// repair is to be dispatched.
	IntoQueued bool
}

func strPtr(s string) *string { return &s }

// Created records how a new incident reached its status: observed,
// triaged once grouped, then the policy of its environment's binding.
func Created(id uuid.UUID, env, policy string) []Transition {
	trs := []Transition{
		{Incident: id, To: domain.IncidentObserved, Actor: domain.ActorSystem, Reason: "first event"},
		{Incident: id, From: strPtr(domain.IncidentObserved), To: domain.IncidentTriaged, Actor: domain.ActorSystem, Reason: "grouped by fingerprint"},
	}
	return append(trs, policyMove(id, env, policy)...)
}

// Regressed records a CLOSED incident that got a new event: it reopens
// (TRIAGED), then the policy moves it on. Its status becomes
// domain.PolicyTarget(policy).
func Regressed(id uuid.UUID, env, policy string) []Transition {
	trs := []Transition{{Incident: id, From: strPtr(domain.IncidentClosed), To: domain.IncidentTriaged, Actor: domain.ActorSystem,
		Reason: "regression: a new event arrived on a closed incident"}}
	return append(trs, policyMove(id, env, policy)...)
}

// policyMove moves a triaged incident on by its binding's policy.
func policyMove(id uuid.UUID, env, policy string) []Transition {
	target := domain.PolicyTarget(policy)
	if target == domain.IncidentTriaged {
		return nil
	}
	return []Transition{{Incident: id, From: strPtr(domain.IncidentTriaged), To: target, Actor: domain.ActorPolicy, ActorID: "binding:" + env,
		Reason: "repair policy " + policy, IntoQueued: target == domain.IncidentQueued}}
}

// TransitionsStmt records trs in one statement, for the caller's
// transaction; ORDER BY ord keeps the bigserial ids in lifecycle order.
func TransitionsStmt(trs []Transition, now time.Time) dbutil.Stmt {
	n := len(trs)
	ids := make([]pgtype.UUID, n)
	tos, actors, actorIDs, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	froms := make([]*string, n)
	for i, t := range trs {
		ids[i], froms[i], tos[i], actors[i], actorIDs[i], reasons[i] = dbutil.PgUUID(t.Incident), t.From, t.To, t.Actor, t.ActorID, t.Reason
	}
	return dbutil.Stmt{SQL: `INSERT INTO incident_transitions (incident_id, from_status, to_status, actor_kind, actor_id, reason, at)
		SELECT u.i, u.f, u.t, u.a, u.ai, u.r, $1
		FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(i, f, t, a, ai, r, ord)
		ORDER BY u.ord`, Args: []any{now, ids, froms, tos, actors, actorIDs, reasons}}
}

// Queued is the incidents trs move into QUEUED.
func Queued(trs []Transition) []uuid.UUID {
	var ids []uuid.UUID
	for _, t := range trs {
		if t.IntoQueued {
			ids = append(ids, t.Incident)
		}
	}
	return ids
}

// AlertCauses are the alerts of an ingest's transitions (the feed's and a
// monitor's): a new incident, a regression, an incident the policy sends
// to approval. One regression sends one alert: a regressed incident that
// the policy then sends to approval is alerted as the regression only
// (docs/contracts/alerts.md).
func AlertCauses(orgID, projectID uuid.UUID, trs []Transition) []domain.AlertCause {
	regressed := map[uuid.UUID]bool{}
	for _, t := range trs {
		if t.From != nil && *t.From == domain.IncidentClosed {
			regressed[t.Incident] = true
		}
	}
	var out []domain.AlertCause
	for _, t := range trs {
		kind := ""
		switch {
		case t.From == nil:
			kind = domain.AlertIncidentNew
		case *t.From == domain.IncidentClosed:
			kind = domain.AlertIncidentRegressed
		case t.To == domain.IncidentWaitingApproval && !regressed[t.Incident]:
			kind = domain.AlertIncidentApproval
		}
		if kind != "" {
			out = append(out, domain.AlertCause{Kind: kind, OrgID: orgID, ProjectID: projectID, IncidentID: t.Incident})
		}
	}
	return out
}
