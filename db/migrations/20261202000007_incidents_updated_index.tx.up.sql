-- The card sweep looks at incidents changed in the last minutes only.
CREATE INDEX incidents_updated_idx ON incidents (updated_at);
