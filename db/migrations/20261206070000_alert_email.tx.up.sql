-- E-mail alert destinations (docs/mail.md): a destination of kind 'email'
-- has recipients instead of a URL (url_enc and url_hint stay empty), and a
-- delivery keeps the server's answer — the SMTP reply to an accepted
-- message ("250 2.0.0 Ok: queued as …"); a refusal's words stay in error.
ALTER TABLE alert_destinations DROP CONSTRAINT alert_destinations_kind_check;
ALTER TABLE alert_destinations ADD CONSTRAINT alert_destinations_kind_check CHECK (kind IN ('webhook', 'slack', 'email'));
ALTER TABLE alert_destinations ADD COLUMN recipients text[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(recipients) <= 20);
ALTER TABLE alert_deliveries ADD COLUMN answer text NOT NULL DEFAULT '';

-- Invitations are mailed when the server has SMTP: what became of the mail
-- ('' none, 'sending', 'sent', or the refusal) is shown to the inviter
-- beside the link, which is shown as before.
ALTER TABLE invitations ADD COLUMN mail_status text NOT NULL DEFAULT '';
