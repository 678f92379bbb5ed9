// Package card is the production card of a project: refreshed from the
// open incidents, or set by an external producer; its refresh requests and
// sweep (tables project_cards, card_changes). It imports only the base
// domain.
package card
