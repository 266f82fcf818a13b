-- The tables of one crawl, format 2 (docs/format.md, "PostgreSQL"). They live in the crawl's own schema,
-- df_<crawl>, which every connection of the crawl has as its search_path.

-- What the crawl is: its format, its settings (order, delay, per_host), a pause, the code installed.
CREATE TABLE meta (
    name text PRIMARY KEY,
    value jsonb NOT NULL
);

-- Counters added to by every client: a step inserts what it adds, one row a counter, and changes no row, so
-- that clients finishing requests at once wait for no row, and no step walks a row's older versions while a
-- long transaction holds vacuum back; a read sums the rows. fold_counters() (each client's beat) replaces
-- them by their sums, in bulk. part: the backend that added (its pid modulo 16; 0 for a sum).
CREATE TABLE counters (
    name text NOT NULL,
    part smallint NOT NULL,
    value double precision NOT NULL
);

-- The seen set: each fingerprint's 64-bit key (the key the job directory and Redis keep).
CREATE TABLE seen (
    key bigint PRIMARY KEY
);

-- Hosts (a request's slot): counts, politeness, rules, and the best request ready (top_priority, top_rank),
-- which orders the hosts a pop looks at.
CREATE TABLE hosts (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE,
    ready_n bigint NOT NULL DEFAULT 0,           -- requests in "requests"
    waiting_n bigint NOT NULL DEFAULT 0,         -- requests in "waiting"
    in_flight bigint NOT NULL DEFAULT 0,         -- requests in "leases"
    done bigint NOT NULL DEFAULT 0,              -- requests done or failed, ever
    top_priority integer NOT NULL DEFAULT 0,     -- the best ready request (when ready_n > 0)
    top_rank bigint NOT NULL DEFAULT 0,
    last_out double precision NOT NULL DEFAULT 0,  -- the last hand-out (server time)
    delay double precision,                      -- its own delay (NULL: the crawl's)
    blocked_until double precision,              -- 'Infinity': until unblocked
    budget bigint,
    failures integer NOT NULL DEFAULT 0          -- consecutive failures since its last done
) WITH (fillfactor = 50);  -- room on each page for a done's update to stay on it (no new index entries)
-- The hosts in the crawl's order, read backwards (best first) from the bound a client gives (pop.sql).
CREATE INDEX hosts_best ON hosts (top_priority, top_rank) WHERE ready_n > 0;

-- Requests ready to be handed out. id: the request's place, from "places"; rank: id (LIFO) or -id (FIFO),
-- so that a host's queue is (priority, rank) highest first.
CREATE TABLE requests (
    id bigint PRIMARY KEY,
    host integer NOT NULL,
    priority integer NOT NULL,
    rank bigint NOT NULL,
    attempts integer NOT NULL,
    dont_filter boolean NOT NULL,
    fingerprint bytea NOT NULL,
    not_before double precision,
    record bytea NOT NULL
);
-- A host's queue, read backwards (best first), each read starting at a bound the host's row gives: the
-- entries earlier pops left behind (dead, but kept while a long transaction holds vacuum back) are passed over.
CREATE INDEX requests_queue ON requests (host, priority, rank);

-- Requests waiting for a time (not_before, a retry's delay, a re-fetch): moved to "requests" when due.
CREATE TABLE waiting (
    id bigint PRIMARY KEY,
    host integer NOT NULL,
    due double precision NOT NULL,
    priority integer NOT NULL,
    attempts integer NOT NULL,
    dont_filter boolean NOT NULL,
    fingerprint bytea NOT NULL,
    not_before double precision,
    record bytea NOT NULL
);
CREATE INDEX waiting_due ON waiting (due);
CREATE INDEX waiting_host ON waiting (host);

-- Requests handed out: leased to a client until expires (server time); lease_no tells one hand-out of a
-- request from a later one, so that a late finish of a lease taken back changes nothing.
CREATE TABLE leases (
    id bigint PRIMARY KEY,
    lease_no bigint NOT NULL,
    client text NOT NULL,
    expires double precision NOT NULL,
    host integer NOT NULL,
    priority integer NOT NULL,
    rank bigint NOT NULL,
    attempts integer NOT NULL,
    dont_filter boolean NOT NULL,
    fingerprint bytea NOT NULL,
    not_before double precision,
    record bytea NOT NULL
);
CREATE INDEX leases_expires ON leases (expires);

-- Failed requests, oldest failure first (seq).
CREATE TABLE failed (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host integer NOT NULL,
    priority integer NOT NULL,
    attempts integer NOT NULL,
    dont_filter boolean NOT NULL,
    fingerprint bytea NOT NULL,
    record bytea NOT NULL,
    error text NOT NULL,
    failed_at double precision NOT NULL
);

-- robots.txt kept per host.
CREATE TABLE robots (
    host text PRIMARY KEY,
    status integer NOT NULL,
    body bytea NOT NULL,
    fetched_at double precision NOT NULL
);

-- The clients of the crawl: who they are and when they last said so (server time).
CREATE TABLE clients (
    id text PRIMARY KEY,
    info jsonb NOT NULL,
    seen_at double precision NOT NULL
);

CREATE SEQUENCE places AS bigint;     -- requests' places (ids)
CREATE SEQUENCE lease_nos AS bigint;  -- hand-outs
