-- Search keys compare byte by byte: they are only matched for equality, and the GIN index of them
-- is cheaper to write without the default collation's comparison (written by hand: drizzle-kit put
-- the collation before the brackets).
ALTER TABLE "message_search" ALTER COLUMN "keys" SET DATA TYPE text[] COLLATE "C";
