-- upsert.lua: one chunk of ADR-005's provider upsert (six steps), atomically.
-- KEYS[1]  <prefix>:{activity}:meta (every other key is derived from it; see lib/core.lua's bind)
-- ARGV[1]  now (caller clock, ms)
-- ARGV[2]  upstream ID
-- ARGV[3]  max_size (final hard limit on the upstream's unextracted inventory)
-- ARGV[4]  clean_budget        ARGV[5] scan_budget
-- ARGV[6]  fetched_at (ms; kept in the static JSON)
-- ARGV[7]  this chunk's operation key suffix ("op:<digest>")
-- ARGV[8]  content digest of the whole call (a reused operation ID with other content conflicts)
-- ARGV[9]  operation result TTL (ms)
-- ARGV[10] JSON array of candidates [id, k, pr, r, c, m, e, uu], validated
-- ARGV[11] whole-call key suffix ("op:<digest>"): the first chunk replays a finished call
-- ARGV[12] "1" on the last chunk, which stores the whole call's result there
-- ARGV[13] JSON totals of the earlier chunks, with the Python-side `dropped`
-- ARGV[14] nonce of this call (its own low-level retry is not a replay to the caller)
-- ARGV[15..] each candidate's static JSON, in candidate order, as Python built it (stored and
--          handed back verbatim; separate arguments so no JSON is decoded or escaped twice)
-- Returns: {"ok": {inserted, refreshed, conflicts, skipped_terminal, over_capacity, cleaned,
--          quarantined, suspect, replayed, new: the inserted IDs in candidate order (a chunk's
--          only: the whole call's stored result has none), [dropped, whole: true when the
--          finished call was replayed]}}
-- Errors: idempotency_conflict, layout_mismatch
local now, u, max_size = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3])
local clean_budget, scan_budget, fetched = tonum(ARGV[4]), tonum(ARGV[5]), tonum(ARGV[6])
local op, content, op_ttl = ARGV[7], ARGV[8], tonum(ARGV[9])
local cands = cjson.decode(ARGV[10])
assert(#KEYS == 1 and #ARGV == 14 + #cands, 'upsert: arity')
local whole_key, last, earlier = k(ARGV[11]), ARGV[12] == '1', cjson.decode(ARGV[13])
local nonce = ARGV[14]

-- A finished call replays whole, whatever the clock has done to its candidates since; a
-- chunk re-sent after a dropped connection replays that chunk. The call's own retry of its
-- last chunk (same nonce: the reply was lost after the whole result was stored) replays the
-- chunk, whose result names its new IDs, which the whole result does not keep.
for _, key in ipairs({whole_key, k(op)}) do
  local stored, replayed = replay(key, content, now, nonce)
  if stored == false then return fail('idempotency_conflict') end
  if stored and (replayed or key ~= whole_key) then
    stored = cjson.decode(stored)
    stored.replayed, stored.whole = replayed, key == whole_key
    return ok(stored)
  end
end

local counts = {inserted = 0, refreshed = 0, conflicts = 0, skipped_terminal = 0,
                over_capacity = 0, cleaned = 0, quarantined = 0, suspect = 0, replayed = false}
-- The new lifecycles' IDs (at most the chunk's candidates): the intake checks only these.
local new = {}
local function inventory() return counter(INV, u) end
local function nullable(v) if v == cjson.null then return nil end return v end

counts.cleaned = counts.cleaned + clean_expired(now, clean_budget)
if inventory() + #cands > max_size then
  -- max_size is about live stock: this upstream's own expired records must not hold places.
  counts.cleaned = counts.cleaned + clean_expired(now, scan_budget, expiry_key(u))
end

local function apply(rec, c)
  rec.pr, rec.r, rec.c = c.pr, nullable(c.r), nullable(c.c)
  rec.m, rec.e, rec.uu = c.m, c.e, c.uu
  hset(R, c.id, c.j)
end

-- Read what the loop will ask about in a few HMGETs instead of two HGETs per proxy.
local ids, keys = {}, {}
for i, a in ipairs(cands) do ids[i], keys[i] = a[1], a[2] end
prefetch(HOT, ids); prefetch(UNIQ, keys)
local known = {}  -- only a proxy already stored can have an owner
for _, id in ipairs(ids) do if hget(HOT, id) then known[#known + 1] = id end end
prefetch(OWN, known)
-- Exit-wide quarantines (report_outcome.lua) of the new proxies, read only when there are any
-- quarantines at all (nothing in this call writes that hash, so EXISTS needs no buffer).
local quarantines = redis.call('EXISTS', QUAR) == 1
if quarantines then
  local every_host = {}
  for i, key in ipairs(keys) do
    if not hget(HOT, ids[i]) then
      every_host[#every_host + 1] = key .. '|*'
      every_host[#every_host + 1] = key .. '|!'  -- suspect (report_outcome.lua)
    end
  end
  prefetch(QUAR, every_host)
end

for i, a in ipairs(cands) do
  local c = {id = a[1], k = a[2], pr = a[3], r = a[4], c = a[5], m = a[6], e = a[7], uu = a[8],
             j = ARGV[14 + i]}
  local holder = hget(UNIQ, c.k)
  local rec = get_rec(c.id)
  -- An expired incumbent (under this exit or this ID) never blocks a new lifecycle.
  if holder and holder ~= c.id then
    local incumbent = get_rec(holder)
    if incumbent.e <= now then
      expire_rec(holder, incumbent)
      counts.cleaned = counts.cleaned + 1
      holder = nil
    end
  end
  if rec and rec.e <= now then
    expire_rec(c.id, rec)
    counts.cleaned = counts.cleaned + 1
    if holder == c.id then holder = nil end
    rec = nil
  end
  if not rec then
    if holder then
      counts.conflicts = counts.conflicts + 1 -- the exit is held under another proxy ID
    elseif quarantines and tonum(hget(QUAR, c.k .. '|*') or '0') > now then
      counts.quarantined = counts.quarantined + 1 -- a banned exit is not taken again for a while
    elseif inventory() >= max_size then
      counts.over_capacity = counts.over_capacity + 1
    else
      -- A suspect exit (clients' recent failures) enters SUSPECT: out of extraction until a
      -- check passes.
      local suspect = quarantines and tonum(hget(QUAR, c.k .. '|!') or '0') > now
      rec = {u = u, k = c.k, s = suspect and 'suspect' or 'fetched'}
      if suspect then counts.suspect = counts.suspect + 1 end
      apply(rec, c)
      local t = track_begin(c.id, nil, nil)
      put_rec(c.id, rec)
      track_end(c.id, t, u, rec, nil)
      -- Unchecked: indexed by its fetch time, so a recheck gives it the intake check it may
      -- never get (its filler died). Its first check re-scores it (track_end).
      zadd(checks_key(u), fetched, c.id)
      touch(checks_key(u))
      hset(UNIQ, c.k, c.id)
      set_expiry(c.id, rec)
      counts.inserted = counts.inserted + 1
      new[#new + 1] = c.id
    end
  elseif rec.k ~= c.k or rec.u ~= u then
    counts.conflicts = counts.conflicts + 1 -- the incumbent (ID and upstream) keeps it
  elseif TERMINAL[rec.s] then
    counts.skipped_terminal = counts.skipped_terminal + 1 -- EXTRACTED never re-enters
  else
    local owner = get_owner(c.id)
    local t = track_begin(c.id, rec, owner)
    apply(rec, c)
    put_rec(c.id, rec)
    set_expiry(c.id, rec)
    if owner and owner.l > rec.uu then set_lease(c.id, owner, rec.uu) end
    if owner then  -- the worker's keys must live as long as the refreshed record
      touch(owner.d and worker_draining_key(owner.w) or worker_owned_key(owner.w))
      -- The worker's snapshot describes a proxy it holds without draining by this record:
      -- any rewrite counts, compared or not (each rewrites fetched_at, and mostly the
      -- lifetimes). bump_revision touches the counter as well.
      if owner.d then touch(worker_revision_key(owner.w)) else bump_revision(owner.w) end
    end
    track_end(c.id, t, u, rec, owner)
    counts.refreshed = counts.refreshed + 1
  end
end
touch(R); touch(HOT); touch(UNIQ)

if last then
  local total = {replayed = false}
  for name, value in pairs(counts) do
    if name ~= 'replayed' then total[name] = value + (earlier[name] or 0) end
  end
  total.dropped = earlier.dropped
  remember(whole_key, content, cjson.encode(total), now + op_ttl, now, nonce)
end
counts.new = new
remember(k(op), content, cjson.encode(counts), now + op_ttl, now, nonce)
finish(now)
return ok(counts)
