-- A card is rewritten whole on every refresh: skip compressing its
-- incident list (hundreds of kilobytes for a busy project) on every write.
ALTER TABLE project_cards ALTER COLUMN incidents SET STORAGE EXTERNAL;
