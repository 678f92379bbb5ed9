package web

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/run"
	"anvil/domain/webhook"
	"anvil/views"
)

// pageDeliveries is how many ledger rows the settings page shows.
const pageDeliveries = 50

var providerLabels = map[forge.Provider]string{forge.GitHub: "GitHub", forge.GitLab: "GitLab", forge.Gitea: "Gitea / Forgejo"}

func (s *Server) webhookCard(c echo.Context, w webhook.Webhook, slug string) views.WebhookCard {
	p := principal(c)
	return views.WebhookCard{ProjectID: w.ProjectID.String(), ProjectSlug: slug, Provider: string(w.Provider), Label: providerLabels[w.Provider],
		Configured: w.Configured, Enabled: w.Enabled, SigningToken: w.Config.SigningToken,
		URL: s.webhookURL(w.ProjectID.String(), string(w.Provider)), CanWrite: p.AtLeast(domain.RoleAdmin), CSRF: s.csrfToken(p)}
}

func (s *Server) deliveriesProps(c echo.Context, projectID uuid.UUID) (views.DeliveriesProps, error) {
	ds, err := s.Webhooks.ListDeliveries(c.Request().Context(), principal(c), projectID, "", pageDeliveries)
	if err != nil {
		return views.DeliveriesProps{}, err
	}
	p := principal(c)
	out := views.DeliveriesProps{ProjectID: projectID.String(), CSRF: s.csrfToken(p)}
	for _, d := range ds {
		row := views.DeliveryRow{Provider: d.Provider, DeliveryID: d.DeliveryID, Outcome: d.Outcome, Event: d.Event,
			Branch: d.Branch, CommitSHA: d.CommitSHA, Attempts: d.Attempts, ReceivedAt: d.ReceivedAt,
			CanRedeliver: canRedeliver(p, d)}
		if d.RunID != nil {
			row.RunID = d.RunID.String()
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// canRedeliver says whether p may evaluate d again (the rule of
// webhook.Webhooks.Redeliver): a stored payload, and a member for a
// queue_full delivery or an admin for any that was not accepted.
func canRedeliver(p *domain.Principal, d run.Delivery) bool {
	switch {
	case d.Payload == nil || d.Outcome == string(forge.OutcomeAccepted):
		return false
	case d.Outcome == string(forge.OutcomeQueueFull):
		return p.AtLeast(domain.RoleMember)
	}
	return p.AtLeast(domain.RoleAdmin)
}

// renderWebhooks renders the page, or the changed card alone for an htmx
// action that was refused. reveal is the plaintext to show once.
func (s *Server) renderWebhooks(c echo.Context, projectID uuid.UUID, changed forge.Provider, reveal *views.WebhookReveal, cardErr string) error {
	ctx := c.Request().Context()
	pr := principal(c)
	proj, err := s.Projects.Get(ctx, pr.OrgID, projectID)
	if err != nil {
		return err
	}
	ws, err := s.Webhooks.List(ctx, pr, projectID)
	if err != nil {
		return err
	}
	refused, err := s.Webhooks.Refusals(ctx, pr, projectID)
	if err != nil {
		return err
	}
	props := views.WebhooksProps{Page: s.page(c, "Webhooks · "+proj.Name, "projects"), ProjectID: projectID.String(), ProjectSlug: proj.Slug, ProjectName: proj.Name}
	for _, w := range ws {
		card := s.webhookCard(c, w, proj.Slug)
		for _, r := range refused {
			if r.Provider == string(w.Provider) {
				card.Refusals = append(card.Refusals, views.RefusalRow{Reason: r.Reason, Count: r.Refusals, LastAt: r.LastAt, LastDetail: r.LastDetail})
			}
		}
		if w.Provider == changed {
			card.Reveal, card.Error = reveal, cardErr
			if isHTMX(c) {
				return Render(c, http.StatusOK, views.WebhookCardView(card))
			}
		}
		props.Cards = append(props.Cards, card)
	}
	if props.Deliveries, err = s.deliveriesProps(c, projectID); err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.WebhooksPage(props))
}

func (s *Server) webhooksPage(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var r webhookReveal
	ok, err := s.takeReveal(c, revealSlot("webhook", id.String()), &r)
	if err != nil || !ok {
		return s.renderWebhooks(c, id, "", nil, "")
	}
	return s.renderWebhooks(c, id, forge.Provider(r.Provider), &r.WebhookReveal, "")
}

// webhookReveal is a new secret kept for the page that shows it once.
type webhookReveal struct {
	Provider string `json:"provider"`
	views.WebhookReveal
}

func (s *Server) webhookDeliveriesFragment(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	d, err := s.deliveriesProps(c, id)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Deliveries(d))
}

// webhookAction runs one page action. One that creates a secret (create,
// rotate) answers with a redirect to the page (HX-Redirect under htmx),
// which shows the secret once; the others re-render the card in place.
// Refusals a person can act on (invalid, conflict) are shown on the card,
// the rest go to the error handler.
func (s *Server) webhookAction(c echo.Context, creates bool, act func(id uuid.UUID, provider string) (*views.WebhookReveal, error)) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	provider, err := forge.ParseProvider(c.Param("provider"))
	if err != nil {
		return domain.NotFound("provider")
	}
	reveal, err := act(id, string(provider))
	var de *domain.Error
	if err != nil && errors.As(err, &de) && (errors.Is(de.Kind, domain.ErrInvalid) || errors.Is(de.Kind, domain.ErrConflict)) {
		return s.renderWebhooks(c, id, provider, nil, de.Message)
	}
	if err != nil {
		return err
	}
	if !creates && isHTMX(c) { // the card swapped in place
		return s.renderWebhooks(c, id, provider, nil, "")
	}
	if reveal != nil {
		// A new secret: the page it redirects to shows it once, and a
		// reload neither shows it again nor makes another.
		if err := s.stashReveal(c, revealSlot("webhook", id.String()), webhookReveal{Provider: string(provider), WebhookReveal: *reveal}); err != nil {
			return err
		}
	}
	return redirect(c, projectPath(c)+"/webhooks")
}

func revealOf(r webhook.WebhookResult, rotated bool) *views.WebhookReveal {
	if r.Secrets.Secret == "" && r.Secrets.SigningToken == "" {
		return nil
	}
	return &views.WebhookReveal{Secret: r.Secrets.Secret, SigningToken: r.Secrets.SigningToken, Rotated: rotated}
}

// webhookCreateSubmit creates an enabled webhook with a generated secret
// (and, for GitLab when asked, a signing token) and shows them once.
func (s *Server) webhookCreateSubmit(c echo.Context) error {
	return s.webhookAction(c, true, func(id uuid.UUID, provider string) (*views.WebhookReveal, error) {
		enabled := true
		in := webhook.WebhookInput{Enabled: &enabled}
		if c.FormValue("signing_token") == "true" {
			on := true
			in.Config = &webhook.WebhookConfigInput{SigningToken: &on}
		}
		res, err := s.Webhooks.Put(c.Request().Context(), principal(c), id, provider, in)
		if err == nil && !res.Created {
			// Created meanwhile (another tab): never a second reveal.
			return nil, nil
		}
		return revealOf(res, false), err
	})
}

func (s *Server) webhookEnabledSubmit(c echo.Context) error {
	return s.webhookAction(c, false, func(id uuid.UUID, provider string) (*views.WebhookReveal, error) {
		var enabled bool
		switch c.FormValue("enabled") {
		case "true":
			enabled = true
		case "false":
		default:
			return nil, domain.Invalid("invalid_enabled", "enabled must be true or false")
		}
		_, err := s.Webhooks.SetEnabled(c.Request().Context(), principal(c), id, provider, enabled)
		return nil, err
	})
}

func (s *Server) webhookRotateSubmit(c echo.Context) error {
	return s.webhookAction(c, true, func(id uuid.UUID, provider string) (*views.WebhookReveal, error) {
		res, err := s.Webhooks.RotateSecret(c.Request().Context(), principal(c), id, provider)
		return revealOf(res, true), err
	})
}

func (s *Server) webhookDeleteSubmit(c echo.Context) error {
	return s.webhookAction(c, false, func(id uuid.UUID, provider string) (*views.WebhookReveal, error) {
		err := s.Webhooks.Delete(c.Request().Context(), principal(c), id, provider)
		var de *domain.Error
		if errors.As(err, &de) && de.Code == "webhook_not_found" {
			return nil, nil // already gone: the card shows "not configured"
		}
		return nil, err
	})
}
