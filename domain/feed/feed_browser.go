package feed

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// Connection kinds (docs/contracts/feed.md, "Browser
// connections"). A server connection's token (anv_srv_) lives in a server
// process: a request that carries it with an Origin is a leaked key and is
// refused (403 origin_refused), as seed 004 has it. A browser connection's
// token (anv_pub_) ships in every page that reports to it, so it is public:
// what bounds it is its list of allowed origins (403 origin_not_allowed
// elsewhere) and a per-client-address rate limit in the doors.
const (
	KindServer  = "server"
	KindBrowser = "browser"
)

// AuditConnectionOriginsChanged is the audit kind of a changed list.
const AuditConnectionOriginsChanged = domain.AuditConnectionOriginsChanged

// ConnectionSpec is what a new connection is asked to be. Kind "" is a
// server connection (the default, as before browser connections existed).
type ConnectionSpec struct {
	Name           string
	Kind           string
	AllowedOrigins []string
}

// check validates the kind and the list: a server connection takes no
// origins (it is refused with any Origin), a browser connection's list is
// normalised (NormalizeOrigins).
func (s ConnectionSpec) check() (string, []string, error) {
	kind := strings.ToLower(strings.TrimSpace(s.Kind))
	switch kind {
	case "", KindServer:
		if len(s.AllowedOrigins) > 0 {
			return "", nil, domain.Invalid("invalid_origin", "a server connection takes no allowed_origins: a server key sent by a browser is refused whatever its origin; create a browser connection for pages")
		}
		return KindServer, []string{}, nil
	case KindBrowser:
		origins, err := NormalizeOrigins(s.AllowedOrigins)
		return KindBrowser, origins, err
	}
	return "", nil, domain.Invalid("invalid_kind", "kind must be server or browser; got %q", domain.ClipString(s.Kind, 40))
}

// tokenAAD binds a sealed browser token to its connection (the same
// expression as domain's sealedColumns entry for feed_connections).
func tokenAAD(id uuid.UUID) []byte { return []byte("feed_connection:" + id.String() + ":token") }

// newConnection makes the row of a new connection and its token. A browser
// token is also kept sealed, so the cockpit can show it whenever asked.
func (f *Feed) newConnection(pr *domain.Project, name, kind string, origins []string) (*FeedConnection, string, error) {
	prefix := tokens.ServerTokenPrefix
	if kind == KindBrowser {
		prefix = tokens.PublicTokenPrefix
	}
	tok, lookup, hash := tokens.New(prefix)
	c := &FeedConnection{ID: uuid.New(), OrgID: pr.OrgID, ProjectID: pr.ID, Name: name, Prefix: lookup, Hash: hash,
		CreatedAt: f.s.Now(), Kind: kind, AllowedOrigins: origins}
	if kind == KindBrowser {
		enc, err := f.s.Keys.Seal([]byte(tok), tokenAAD(c.ID))
		if err != nil {
			return nil, "", fmt.Errorf("feed: seal browser token: %w", err)
		}
		c.TokenEnc = enc
	}
	return c, tok, nil
}

// PublicToken is a browser connection's token ("" for a server
// connection, whose token is never kept).
func (f *Feed) PublicToken(c *FeedConnection) (string, error) {
	if c.Kind != KindBrowser || c.TokenEnc == "" {
		return "", nil
	}
	b, err := f.s.Keys.Open(c.TokenEnc, tokenAAD(c.ID))
	if err != nil {
		return "", fmt.Errorf("feed: open browser token of %s: %w", c.ID, err)
	}
	return string(b), nil
}

// GetConnection reads one connection of a project of the caller's
// organisation (404 otherwise).
func (f *Feed) GetConnection(ctx context.Context, p *domain.Principal, projectID, id uuid.UUID) (*FeedConnection, error) {
	c := new(FeedConnection)
	err := f.s.DB.NewSelect().Model(c).Where("id = ? AND project_id = ? AND org_id = ?", id, projectID, p.OrgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("connection")
	}
	if err != nil {
		return nil, fmt.Errorf("feed: connection %s: %w", id, err)
	}
	return c, nil
}

// SetAllowedOrigins replaces a browser connection's list. A server
// connection has none to change (422), a revoked one is 409; an empty list
// is allowed and refuses every browser.
func (f *Feed) SetAllowedOrigins(ctx context.Context, p *domain.Principal, projectID, id uuid.UUID, entries []string) (*FeedConnection, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, err
	}
	if entries == nil {
		return nil, domain.Invalid("invalid_origin", "allowed_origins is required: a list of origins such as https://shop.example (an empty list refuses every browser)")
	}
	origins, err := NormalizeOrigins(entries)
	if err != nil {
		return nil, err
	}
	c := new(FeedConnection)
	err = f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Model(c).Where("id = ? AND project_id = ? AND org_id = ?", id, projectID, p.OrgID).For("UPDATE").Scan(ctx); err != nil {
			return err
		}
		switch {
		case c.Kind != KindBrowser:
			return domain.Invalid("invalid_origin", "connection %s is a server connection: it has no allowed origins (a server key sent by a browser is always refused)", c.Name)
		case c.RevokedAt != nil:
			return domain.Conflict("connection_revoked", "connection %s is revoked; issue a new one", c.Name)
		}
		if _, err := tx.NewRaw(`UPDATE feed_connections SET allowed_origins = ?::text[] WHERE id = ?`, pgdialect.Array(origins), id).Exec(ctx); err != nil {
			return err
		}
		from := append([]string{}, c.AllowedOrigins...)
		c.AllowedOrigins = origins
		return domain.RecordAudit(ctx, tx, p, AuditConnectionOriginsChanged, c.Name, map[string]any{"connection_id": id.String(), "allowed_origins": origins, "from": from})
	})
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("connection")
	}
	if err != nil {
		return nil, fmt.Errorf("feed: allowed origins of %s: %w", id, err)
	}
	f.senders.Clear()
	return c, nil
}

// OriginVerdict is a door's judgement of a live sender's origin (the check
// between the token's 401 and the rate limit's 429).
type OriginVerdict int

// The verdicts: admitted; a server key sent by a browser (403
// origin_refused); a browser key from an origin not listed (403
// origin_not_allowed).
const (
	OriginAdmitted OriginVerdict = iota
	OriginRefused
	OriginNotAllowed
)

// JudgeOrigin applies the contract's origin rule. hasOrigin says whether
// the request carried an Origin header at all (a server key is refused
// with any, even "null"); origin is that header's value, or — without one
// — the origin of the Referer. A browser key with neither is admitted: the
// same public DSN serves mobile and desktop apps, which send no origin.
func (snd *FeedSender) JudgeOrigin(hasOrigin bool, origin string) OriginVerdict {
	if !snd.Browser {
		if hasOrigin {
			return OriginRefused
		}
		return OriginAdmitted
	}
	if !hasOrigin && origin == "" {
		return OriginAdmitted
	}
	if OriginAllowed(snd.AllowedOrigins, origin) {
		return OriginAdmitted
	}
	return OriginNotAllowed
}
