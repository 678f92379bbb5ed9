package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/feed"
	"anvil/views"
)

// feedProps reads a project's connections and bindings for its feed page.
func (s *Server) feedProps(c echo.Context) (views.FeedProps, error) {
	id, err := s.projectIDParam(c)
	if err != nil {
		return views.FeedProps{}, err
	}
	p := principal(c)
	ctx := c.Request().Context()
	pr, err := s.Projects.Get(ctx, p.OrgID, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	cs, err := s.Feed.ListConnections(ctx, p, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	bs, err := s.Feed.ListBindings(ctx, p, id)
	if err != nil {
		return views.FeedProps{}, err
	}
	props := views.FeedProps{Page: s.page(c, pr.Name+" · Feed", "projects"), ProjectID: pr.ID.String(), ProjectSlug: pr.Slug, ProjectName: pr.Name,
		IngestURL: strings.TrimRight(s.opts.PublicURL, "/") + "/api/feed/events", OTLPEndpoint: strings.TrimRight(s.opts.PublicURL, "/") + "/api/otlp", CanWrite: p.AtLeast(domain.RoleAdmin)}
	outcomes, err := s.connectionOutcomes(ctx, cs)
	if err != nil {
		return views.FeedProps{}, err
	}
	for i, cn := range cs {
		row := views.FeedConnectionRow{ID: cn.ID.String(), Name: cn.Name, Prefix: cn.Prefix, CreatedAt: cn.CreatedAt, Revoked: cn.RevokedAt != nil,
			Outcome: outcomes[cn.ID], Kind: cn.Kind, AllowedOrigins: cn.AllowedOrigins}
		if err := s.browserRow(&cs[i], pr.Number, &row); err != nil {
			return views.FeedProps{}, err
		}
		if cn.LastUsedAt != nil {
			row.LastUsedAt = *cn.LastUsedAt
		}
		props.Connections = append(props.Connections, row)
	}
	for _, b := range bs {
		props.Bindings = append(props.Bindings, views.FeedBindingRow{Environment: b.Environment, RepairPolicy: b.RepairPolicy})
	}
	props.CurlEnv, props.CurlRefusal = curlEnvironment(bs)
	cards, err := s.Cards.ForProjects(ctx, []uuid.UUID{pr.ID}) // Projects.Get has checked the organisation
	if err != nil {
		return views.FeedProps{}, err
	}
	if card := cards[pr.ID]; card.External && card.ConfigID != nil {
		props.Card = views.FeedCardProps{External: true, IngestURL: s.cardIngestURL(p.OrgSlug, *card.ConfigID)}
	}
	if props.UsedToday, props.Budget, err = s.retention.Budget().Usage(ctx, p.OrgID, pr.ID); err != nil {
		return views.FeedProps{}, err
	}
	return props, nil
}

// cardIngestURL is where an external producer replaces a card.
func (s *Server) cardIngestURL(orgSlug string, configID uuid.UUID) string {
	return strings.TrimRight(s.opts.PublicURL, "/") + "/api/ingest/dashboard/" + url.PathEscape(orgSlug) + "/" + configID.String() + "/incidents"
}

// feedCardSubmit hands the project's production card to an external
// producer (a fresh token; an earlier one stops working) or back to the
// incident store, and answers with a redirect to the feed page, which shows
// the token once.
func (s *Server) feedCardSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var external bool
	switch c.FormValue("external") {
	case "true":
		external = true
	case "false":
	default:
		return domain.Invalid("invalid_external", `"external" must be true (hand the card to an external producer) or false (back to the incident store)`)
	}
	p := principal(c)
	cfg, err := s.Cards.SetExternal(c.Request().Context(), p, id, external)
	if err != nil {
		return err
	}
	if cfg.Token != "" {
		if err := s.stashReveal(c, revealSlot("feed-card", id.String()), tokenReveal{Token: cfg.Token}); err != nil {
			return err
		}
	}
	return redirect(c, projectPath(c)+"/feed")
}

// tokenReveal is a token kept for the page that shows it once.
type tokenReveal struct {
	Token string `json:"token"`
	DSN   string `json:"dsn,omitempty"` // a feed connection's Sentry DSN, which holds the token
}

// feedPage: GET /projects/:projectId/feed.
func (s *Server) feedPage(c echo.Context) error {
	props, err := s.feedProps(c)
	if err != nil {
		return err
	}
	var conn, card tokenReveal
	if _, err := s.takeReveal(c, revealSlot("feed-connection", props.ProjectID), &conn); err != nil {
		return err
	}
	props.NewToken, props.NewDSN = conn.Token, conn.DSN
	if ok, err := s.takeReveal(c, revealSlot("feed-card", props.ProjectID), &card); err != nil {
		return err
	} else if ok && props.Card.External {
		props.Card.NewToken = card.Token
	}
	return Render(c, http.StatusOK, views.FeedPage(props))
}

// curlEnvironment picks the environment the page's curl example reports
// for: one whose events are kept. Without one it says, instead, why an
// event sent now would be refused (the ingest's reason codes).
func curlEnvironment(bs []feed.FeedBinding) (env, refusal string) {
	if len(bs) == 0 {
		return "", "No binding yet: an event sent now would be refused as no_binding. Add a binding (step 1) and an example appears here."
	}
	bound := map[string]bool{}
	wildcard := false
	for _, b := range bs {
		bound[b.Environment] = true
		if b.RepairPolicy == domain.PolicyOff {
			continue
		}
		if b.Environment == feed.WildcardEnvironment {
			wildcard = true
			continue
		}
		if env == "" {
			env = b.Environment
		}
	}
	if env != "" {
		return env, ""
	}
	if wildcard {
		// The wildcard admits every environment without a binding of its own.
		for _, e := range []string{"production", "staging", "example"} {
			if !bound[e] {
				return e, ""
			}
		}
	}
	return "", "Every binding's repair policy is off: an event sent now would be refused as binding_disabled. Change a binding's policy (step 1) and an example appears here."
}

// refusal splits a client's refusal (shown on the page) from a failure.
func refusal(err error) (*domain.Error, error) {
	var de *domain.Error
	if err != nil && errors.As(err, &de) && !errors.Is(de.Kind, domain.ErrNotFound) {
		return de, nil
	}
	return nil, err
}

// feedConnectionCreateSubmit creates a connection and redirects to the feed
// page, which shows its token once: a reload creates nothing.
func (s *Server) feedConnectionCreateSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	spec := feed.ConnectionSpec{Name: c.FormValue("name"), Kind: c.FormValue("kind")}
	if spec.Kind == feed.KindBrowser {
		spec.AllowedOrigins = originLines(c.FormValue("allowed_origins"))
	}
	conn, tok, err := s.Feed.CreateConnectionOf(c.Request().Context(), principal(c), id, spec)
	de, err := refusal(err)
	if err != nil {
		return err
	}
	if de != nil {
		props, err := s.feedProps(c)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.ConnectionName, props.ConnectionKind, props.ConnectionOrigins = c.FormValue("name"), c.FormValue("kind"), c.FormValue("allowed_origins")
		return Render(c, statusOf(de.Kind), views.FeedPage(props))
	}
	if conn.Kind == feed.KindBrowser { // listed with its DSN whenever asked
		return redirect(c, projectPath(c)+"/feed#connection-"+conn.ID.String())
	}
	dsn, err := s.connectionDSN(c, conn.ProjectID, tok)
	if err != nil {
		return err
	}
	if err := s.stashReveal(c, revealSlot("feed-connection", id.String()), tokenReveal{Token: tok, DSN: dsn}); err != nil {
		return err
	}
	return redirect(c, projectPath(c)+"/feed")
}

// feedConnectionRevokeSubmit revokes (htmx with hx-confirm, or a plain form).
func (s *Server) feedConnectionRevokeSubmit(c echo.Context) error {
	pid, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	cid, err := pathUUID(c, "connectionId", "connection")
	if err != nil {
		return err
	}
	projectID, err := s.Feed.RevokeConnection(c.Request().Context(), principal(c), cid)
	if err != nil {
		return err
	}
	back := projectPath(c)
	if projectID != pid { // the connection's own project, whatever the path said
		back = "/projects/" + projectID.String()
	}
	return redirect(c, back+"/feed")
}

// feedBindingSubmit adds a binding (the add form: never over an existing
// one) or changes one (its row's form).
func (s *Server) feedBindingSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	env, policy := c.FormValue("environment"), c.FormValue("repair_policy")
	if c.FormValue("add") == "true" {
		_, err = s.Feed.AddBinding(c.Request().Context(), principal(c), id, env, policy)
	} else {
		_, err = s.Feed.PutBinding(c.Request().Context(), principal(c), id, env, policy)
	}
	de, err := refusal(err)
	if err != nil {
		return err
	}
	if de != nil {
		props, perr := s.feedProps(c)
		if perr != nil {
			return perr
		}
		props.Error = de.Message
		if c.FormValue("add") == "true" {
			props.BindingEnv, props.BindingPolicy = env, policy
		}
		return Render(c, statusOf(de.Kind), views.FeedPage(props))
	}
	return redirect(c, projectPath(c)+"/feed")
}

// feedBindingDeleteSubmit removes a binding.
func (s *Server) feedBindingDeleteSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	if err := s.Feed.DeleteBinding(c.Request().Context(), principal(c), id, c.FormValue("environment")); err != nil {
		return err
	}
	return redirect(c, projectPath(c)+"/feed")
}
