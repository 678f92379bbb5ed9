-- A session's browser and device as Account → Sessions names them
-- ("Firefox on Linux"): the login's User-Agent header, cut to 512 bytes.
ALTER TABLE sessions ADD COLUMN user_agent text NOT NULL DEFAULT '';
