-- Run once, when the postgres volume is new: each bzzz node keeps its own store (a projection
-- of the shared event log), so each gets its own database.
CREATE DATABASE bzzz_a;
CREATE DATABASE bzzz_b;
