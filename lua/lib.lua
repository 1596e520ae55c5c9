-- lib.lua: the shared part of the RedisPool function library. activity/redis/_scripts.py
-- loads it once (FUNCTION LOAD) followed by every operation file, each wrapped as one
-- registered function; the helpers below are created once per load, not once per call (as a
-- prelude of every EVALSHA they cost more than the operations themselves: docs/PERFORMANCE.md).
-- Mirrors activity/memory.py function for function. Only declarations at the top level:
-- Redis runs a library's top level with no access to `redis.call`, `string` or `cjson`.
--
-- Keys: KEYS[1] of every operation is the namespace's meta key `<prefix>:{activity}:meta`;
-- `bind` derives every other key from it. Index keys depend on a record's own labels (its region,
-- carrier, ...), which no caller can know before the script has read the record, so they are
-- named inside the script. All of them carry the `{activity}` hash tag: one slot, as the ADR's
-- Cluster single-slot option requires.
--
-- Replies: every script returns one JSON string, {"ok": ...} or {"err": code, "reason": ...};
-- the codes are activity/errors.py's table, the reasons its *_REASONS tuples (no free text:
-- MemoryPool must give the same answer). A Lua error (assert) is a programming error.

local LAYOUT = '1'
local TERMINAL = {extracted = true, removed = true}
local MANAGED = {fetched = true, checking = true, available = true, suspect = true, draining = true}

local META, NS, R, HOT, HEALTH, UNIQ, EXP, AVAIL, INV, MANAGED_COUNT
local OWN, OWN_EXP, TICKETS, EPOCH, SESS, SESS_EXP, RT, RT_EXP, GEN, FIXED
local OUTCOMES, QUAR, QUAR_EXP, QUAR_EXITS
local function k(name) return NS .. name end

-- Keys this call touched whose lifetime must reach the pool's horizon (see touch/finish).
local touched = {}
local function touch(key) touched[key] = true end

local GRACE_MS = 60000
local call_ttl = nil  -- the TTL this call extended keys to, for flush_counts

-- Hash and sorted-set access goes through the helpers below, never through `redis.call`
-- directly. Writes are buffered for the length of one call and sent as one command per key
-- (flush_writes): an upsert chunk of 500 new proxies is five HSET/ZADD commands, not 2,500,
-- and every command sent from Lua costs a fixed ~1.5 us here (docs/PERFORMANCE.md). Reads
-- see this call's own buffered writes first, then what they (or a `prefetch`) read before.
-- A sorted-set read flushes the buffered sorted-set writes first (zread): ranks and counts
-- must see them. Buffers live for one call (reset by bind); nothing is kept across calls.
local hbuf, zbuf, rcache = {}, {}, {}  -- key -> field/member -> value (false: deleted/removed)
local FLUSH_CHUNK = 400  -- fields or members per command: keeps `unpack` far below Lua's limit

-- t[key], a table created on first use (per-key buffers, caches).
local function subtable(t, key)
  local sub = t[key]
  if not sub then
    sub = {}
    t[key] = sub
  end
  return sub
end

local function hget(hash, field)
  local pending_hash = hbuf[hash]
  if pending_hash then
    local v = pending_hash[field]
    if v ~= nil then return v or nil end
  end
  local cached = subtable(rcache, hash)
  local v = cached[field]
  if v == nil then
    v = redis.call('HGET', hash, field)
    cached[field] = v
  end
  return v or nil
end

-- Read many fields of one hash in a few HMGETs, so later hget calls need no round trip.
local function prefetch(hash, fields)
  local cached = subtable(rcache, hash)
  for first = 1, #fields, FLUSH_CHUNK do
    local last = math.min(#fields, first + FLUSH_CHUNK - 1)
    local values = redis.call('HMGET', hash, unpack(fields, first, last))
    for i = first, last do
      if cached[fields[i]] == nil then cached[fields[i]] = values[i - first + 1] end
    end
  end
end

local function hset(hash, field, value) subtable(hbuf, hash)[field] = value end
local function hdel(hash, field) subtable(hbuf, hash)[field] = false end
local function hexists(hash, field) return hget(hash, field) ~= nil end
local function zadd(key, score, member) subtable(zbuf, key)[member] = score end
local function zrem(key, member) subtable(zbuf, key)[member] = false end

local function score_text(score)
  if score == math.floor(score) then return string.format('%d', score) end
  return string.format('%.17g', score)
end

-- Send one key's buffered writes: sets/adds in chunks, then deletes/removes in chunks.
local function send(set_cmd, del_cmd, key, entries, pair)
  local sets, dels = {}, {}
  for name, value in pairs(entries) do
    if value == false then
      dels[#dels + 1] = name
    else
      pair(sets, name, value)
    end
  end
  for first = 1, #sets, 2 * FLUSH_CHUNK do
    redis.call(set_cmd, key, unpack(sets, first, math.min(#sets, first + 2 * FLUSH_CHUNK - 1)))
  end
  for first = 1, #dels, FLUSH_CHUNK do
    redis.call(del_cmd, key, unpack(dels, first, math.min(#dels, first + FLUSH_CHUNK - 1)))
  end
end
local function hash_pair(out, field, value)
  out[#out + 1] = field
  out[#out + 1] = value
end
local function zset_pair(out, member, score)
  out[#out + 1] = score_text(score)
  out[#out + 1] = member
end

local function flush_zsets()
  for key, entries in pairs(zbuf) do send('ZADD', 'ZREM', key, entries, zset_pair) end
  zbuf = {}
end

-- Every buffered write, sent. Hash values stay readable through rcache afterwards.
local function flush_writes()
  for hash, entries in pairs(hbuf) do
    send('HSET', 'HDEL', hash, entries, hash_pair)
    local cached = subtable(rcache, hash)
    for field, value in pairs(entries) do cached[field] = value end
  end
  hbuf = {}
  flush_zsets()
end

-- A sorted-set read (ZCARD, ZRANGE, ZCOUNT, ZRANGEBYSCORE, ...), after the buffered writes.
local function zread(cmd, key, ...)
  if next(zbuf) then flush_zsets() end
  return redis.call(cmd, key, ...)
end

-- Lifetimes only ever grow (see finish): extend, never shorten. A key without a TTL gets one.
local function extend(key, ms)
  if next(hbuf) or next(zbuf) then flush_writes() end  -- the key may exist only in a buffer
  local current = redis.call('PTTL', key)
  if current == -1 or (current >= 0 and current < ms) then redis.call('PEXPIRE', key, ms) end
end

local function ok(value) return cjson.encode({ok = value}) end
local function fail(code, reason, extra)
  local reply = extra or {}
  reply.err, reply.reason = code, reason
  return cjson.encode(reply)
end

local function tonum(s) return tonumber(s) end

local function get_json(hash, field)
  local raw = hget(hash, field)
  if raw then return cjson.decode(raw) end
  return nil
end
-- A proxy is stored in two parts. `records` holds its static JSON, built by Python at upsert
-- (address, labels, lifetimes, credentials) and only ever handed back verbatim; `hot` holds
-- what the operations read and change, as one delimited string that needs no JSON work:
--   state|expires|usable|checked|max|upstream|protocol|region|carrier|key digest|extracted by
-- (labels are tokens without '|'; the client ID comes last, so it may contain anything).
local HOT_PATTERN = '^(%a+)|(%d+)|(%d+)|(%d*)|(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
local function blank(v) if v == '' then return nil end return v end
local function get_rec(pid)
  local raw = hget(HOT, pid)
  if not raw then return nil end
  local s, e, uu, ck, m, u, pr, r, c, key, x = string.match(raw, HOT_PATTERN)
  assert(s, 'unreadable hot record ' .. pid)  -- never act on a record it cannot read
  return {s = s, e = tonumber(e), uu = tonumber(uu), ck = tonumber(ck), m = tonumber(m), u = u,
          pr = pr, r = blank(r), c = blank(c), k = key, x = blank(x)}
end
local function put_rec(pid, rec)
  hset(HOT, pid, table.concat({rec.s, string.format('%d', rec.e),
    string.format('%d', rec.uu), rec.ck and string.format('%d', rec.ck) or '', rec.m, rec.u,
    rec.pr, rec.r or '', rec.c or '', rec.k, rec.x or ''}, '|'))
end
local function get_owner(pid) return get_json(OWN, pid) end

local function digest(value) return redis.sha1hex(value) end
-- Key names built from labels, kept for one call (bind clears them): an upsert chunk or an
-- extract names the same few index keys for every proxy it touches.
local named = {}
local function named_key(dim, value)
  local by_value = subtable(named, dim)
  local key = by_value[value]
  if not key then
    key = k(dim .. ':' .. value)
    by_value[value] = key
  end
  return key
end
local function expiry_key(u) return named_key('expiry', u) end
local function owned_key(u) return k('owned:' .. digest(u)) end
local function worker_owned_key(w) return k('worker-owned:' .. digest(w)) end
local function worker_draining_key(w) return k('worker-draining:' .. digest(w)) end
local function index_key(dim, value) if dim == 'available' then return AVAIL end return named_key(dim, value) end

local function index_keys(rec)
  local keys = {AVAIL, named_key('upstream', rec.u), named_key('protocol', rec.pr)}
  if rec.r ~= cjson.null and rec.r ~= nil then keys[#keys + 1] = named_key('region', rec.r) end
  if rec.c ~= cjson.null and rec.c ~= nil then keys[#keys + 1] = named_key('carrier', rec.c) end
  return keys
end

local function flags(rec, owner)
  if not rec then return 0, 0 end
  local state = rec.s
  if owner and owner.d then state = 'draining' end
  return (TERMINAL[rec.s] and 0 or 1), (MANAGED[state] and 1 or 0)
end

-- Counter changes are summed during a call and written once at its end (flush_counts, run by
-- the function wrapper after every operation): a chunk of 500 inserts is one HINCRBY, not
-- 1,000. Reads inside the same call go through `counter`, which adds what is pending.
local pending = {}
local function bump(hash, field, delta)
  if delta ~= 0 then
    local fields = subtable(pending, hash)
    fields[field] = (fields[field] or 0) + delta
  end
end

local stored_counts = {}  -- hash .. '|' .. field -> value at the start of this call
local function counter(hash, field)
  local id = hash .. '|' .. field
  local base = stored_counts[id]
  if base == nil then
    base = tonumber(redis.call('HGET', hash, field) or '0')
    stored_counts[id] = base
  end
  local fields = pending[hash]
  return base + (fields and fields[field] or 0)
end

local function flush_counts()
  for hash, fields in pairs(pending) do
    for field, delta in pairs(fields) do
      if delta ~= 0 and redis.call('HINCRBY', hash, field, delta) == 0 then
        redis.call('HDEL', hash, field)
      end
    end
    if not call_ttl then call_ttl = redis.call('PTTL', HOT) end  -- `hot` lives to the horizon
    if call_ttl > 0 then extend(hash, call_ttl) end
  end
  pending = {}
end

-- Every state, ownership or expiry change of a proxy is bracketed by track_begin/track_end,
-- so counters and index membership stay derived from the record (memory.py `_tracking`).
local function track_begin(pid, rec, owner)
  local inv, man = flags(rec, owner)
  -- Remove it from exactly where track_end put it: the AVAILABLE indexes when it is AVAILABLE
  -- and unowned, the upstream's owned index when AVAILABLE and held without draining.
  if rec and rec.s == 'available' then
    if not owner then
      for _, key in ipairs(index_keys(rec)) do zrem(key, pid) end
    elseif not owner.d then
      zrem(owned_key(rec.u), pid)
    end
  end
  return {inv = inv, man = man}
end

local function track_end(pid, t, upstream, rec, owner)
  local inv, man = flags(rec, owner)
  bump(INV, upstream, inv - t.inv)
  bump(MANAGED_COUNT, upstream, man - t.man)
  if rec and rec.s == 'available' then
    if not owner then
      for _, key in ipairs(index_keys(rec)) do
        zadd(key, rec.uu, pid)
        touch(key)
      end
    elseif not owner.d then
      local key = owned_key(rec.u)
      zadd(key, rec.uu, pid)
      touch(key)
    end
  end
end

local function set_lease(pid, owner, lease)
  owner.l = lease
  hset(OWN, pid, cjson.encode(owner))
  zadd(OWN_EXP, lease, pid)
  touch(OWN); touch(OWN_EXP)
  if not owner.d then
    local key = worker_owned_key(owner.w)
    zadd(key, lease, pid)
    touch(key)
  end
end

local function drop_owner(pid)
  local owner = get_owner(pid)
  if not owner then return nil end
  hdel(OWN, pid)
  zrem(OWN_EXP, pid)
  zrem(worker_owned_key(owner.w), pid)
  local ticket = get_json(TICKETS, pid)
  if ticket then
    hdel(TICKETS, pid)
    zrem(worker_draining_key(ticket.w), pid)
  end
  return owner
end

local function delete_rec(pid, rec)
  local owner = get_owner(pid)
  local t = track_begin(pid, rec, owner)
  hdel(R, pid)
  hdel(HOT, pid)
  hdel(HEALTH, pid)
  if hget(UNIQ, rec.k) == pid then hdel(UNIQ, rec.k) end
  zrem(EXP, pid)
  zrem(expiry_key(rec.u), pid)
  drop_owner(pid)
  hdel(OUTCOMES, pid)  -- report_outcome.lua: an outcome lives with its record
  track_end(pid, t, rec.u, nil, nil)
end

-- Up to `limit` members of sorted set `zkey` scored at most `now` (bounded: one read of
-- limit + 1), and whether more are due.
local function due_members(zkey, now, limit)
  local due = zread('ZRANGEBYSCORE', zkey, '-inf', now, 'LIMIT', 0, limit + 1)
  local more = #due > limit
  if more then due[#due] = nil end
  return due, more
end

-- Remove up to `limit` records past their hard expiry from `zkey` (global or one upstream's).
local function clean_expired(now, limit, zkey)
  local due, more = due_members(zkey or EXP, now, limit)
  for _, pid in ipairs(due) do
    local rec = get_rec(pid)
    if rec then
      delete_rec(pid, rec)
    else  -- an index entry without its record (never expected): drop it, do not stop
      zrem(EXP, pid)
      if zkey then zrem(zkey, pid) end
    end
  end
  return #due, more
end

-- Remove up to `limit` ended quarantines of banned exits (report_outcome.lua); returns the
-- number removed and whether more have ended.
local function clean_quarantines(now, limit)
  local ended, more = due_members(QUAR_EXP, now, limit)
  for _, exit in ipairs(ended) do
    hdel(QUAR, exit)
    zrem(QUAR_EXP, exit)
    zrem(QUAR_EXITS, exit)
  end
  return #ended, more
end

local function set_expiry(pid, rec)
  zadd(EXP, rec.e, pid)
  local key = expiry_key(rec.u)
  zadd(key, rec.e, pid)
  touch(EXP); touch(key)
end

-- Key lifetimes. `meta.horizon` is the latest hard expiry the pool has held (caller clock, ms)
-- and only grows. Every key lives at least until the horizon plus a grace, set as a relative
-- TTL (a caller clock far from the server's is harmless), and lifetimes only ever grow: a
-- provider shortening one proxy's TTL must never shorten a key that other live data is in.
-- The fixed keys are extended together whenever the horizon moves; a dynamic key (an index,
-- a per-worker set) whenever an operation touches it; counters when they are written.
local function finish(now)
  flush_writes()
  local latest = zread('ZRANGE', EXP, -1, -1, 'WITHSCORES')[2]
  local known = tonumber(redis.call('HGET', META, 'horizon') or '0')
  if latest and tonumber(latest) > known then
    known = tonumber(latest)
    redis.call('HSET', META, 'horizon', string.format('%d', known), 'layout', LAYOUT)
    if known - now + GRACE_MS > 0 then
      for _, key in ipairs(FIXED) do extend(key, known - now + GRACE_MS) end
    end
  end
  local ttl = known - now + GRACE_MS
  if ttl <= 0 then return end
  call_ttl = ttl
  for key in pairs(touched) do extend(key, ttl) end
end

-- For operations that are given no caller clock: `hot` already lives to the horizon.
local function finish_like_records()
  flush_writes()
  local ttl = redis.call('PTTL', HOT)
  if ttl <= 0 then return end
  call_ttl = ttl
  for key in pairs(touched) do extend(key, ttl) end
end

-- Stored results (idempotency, operation IDs). The key's own TTL frees memory; the stored
-- expiry `x` keeps replay time on the caller's clock, like every other proxy time.
-- Stored as "digest|expires|nonce|<result JSON>". Returns the result JSON and whether it is a
-- replay to the caller (not when the stored call is this very call, `nonce`: our own retry
-- after a lost reply is the first answer the caller sees); nil when there is none; false when
-- the request digest differs.
local function replay(key, request_digest, now, nonce)
  local stored = redis.call('GET', key)
  if not stored then return nil end
  local d, x, n, result = string.match(stored, '^([^|]*)|(%d+)|([^|]*)|(.*)$')
  if tonumber(x) <= now then return nil end
  if d ~= request_digest then return false end
  return result, n ~= nonce
end

local function remember(key, request_digest, result_json, expires, now, nonce)
  redis.call('SET', key, table.concat({request_digest, string.format('%d', expires), nonce,
             result_json}, '|'), 'PX', expires - now)
end

-- CallQuota counters (activity/_quota.py is the same arithmetic; read the reasoning there).
-- One hash per client, limit and window: w (the window index c counts in), c (its units), p
-- (the previous window's). The client ID comes last in the key name, so that no two clients,
-- limits or windows share one. A counter lives until two windows after the one it counts in,
-- plus QUOTA_SLACK_MS: it is read on the caller's clock but expired on the server's, which may
-- differ a little. Counters are written at once (redis.call), not through the write buffer.
local QUOTA_SLACK_MS = 60000
-- How long extract's "this call's unit is charged" marker lives (`quota-charged:<nonce>`, left
-- only by a retry-safe call that stored no result): its own retry follows within the call's
-- socket timeouts.
local QUOTA_RETRY_MARK_MS = 10000
local QUOTA_WINDOW = {calls = 'call_window', proxies = 'proxy_window'}

-- Adds `units` to a counter `quota_take` read (and found room in) during this call.
local function quota_add(counter, units, now)
  local window, idx = counter.window, counter.idx
  redis.call('HSET', counter.key, 'w', string.format('%d', idx), 'c', counter.c + units,
    'p', counter.p)
  -- Two windows from the one counted in (later than now when the clock went back).
  redis.call('PEXPIRE', counter.key, string.format('%d', (idx + 2) * window - now + QUOTA_SLACK_MS))
end

-- Takes `cost` units of the client's `limit` ('calls' or 'proxies') at `now`, or with `dry`
-- only checks that they fit. Returns nil and the counter as read (for a later `quota_add` in
-- the same call), or the quota_exceeded reply (nothing written).
local function quota_take(client, quota, limit, now, cost, dry)
  local units, window = quota[limit], quota[QUOTA_WINDOW[limit]]
  local key = k(string.format('quota:%s:%d:%d:', limit, units, window) .. client)
  local idx = math.floor(now / window)
  local got = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(got[1]), 0, 0
  if w ~= nil and w >= idx - 1 then
    if w == idx - 1 then
      p = tonumber(got[2]) or 0
    else
      c, p = tonumber(got[2]) or 0, tonumber(got[3]) or 0
      idx = math.max(idx, w) -- the clock went back: keep the newest window
    end
  end
  local elapsed = now - idx * window
  local behind = math.max(0, -elapsed) -- until the newest window seen starts (clock went back)
  elapsed = math.max(0, elapsed)
  local count = math.floor(p * (window - elapsed) / window) + c
  if count + cost <= units then
    local counter = {key = key, window = window, idx = idx, c = c, p = p}
    if not dry then quota_add(counter, cost, now) end
    return nil, counter
  end
  local room = units - cost
  local wait = 0
  if room < 0 then
    wait = 2 * window
  elseif c > room then
    wait = behind + (window - elapsed) + math.floor(window * (c - room - 1) / c) + 1
  elseif p > 0 then
    wait = behind + math.floor(window * (p - room + c - 1) / p) + 1 - elapsed
  end
  return fail('quota_exceeded', limit, {retry_after_ms = wait, left = math.max(0, units - count)})
end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function count_above(key, threshold) return zread('ZCOUNT', key, '(' .. threshold, '+inf') end
local function range_above(key, threshold, limit)
  return zread('ZRANGEBYSCORE', key, '(' .. threshold, '+inf', 'LIMIT', 0, limit)
end

-- Worker sessions and runtime live on the server's clock (ADR rule 5).
local function live_session(w, snow)
  local s = get_json(SESS, w)
  if s and s.x > snow then return s end
  return nil
end

local function fresh_runtime(w, snow)
  local s = live_session(w, snow)
  local rt = get_json(RT, w)
  if not s or not rt or rt.sid ~= s.sid or rt.x <= snow then return nil end
  return rt
end

-- Returns the session or nil plus an error reply.
local function session_for_write(w, sid, snow)
  local s = get_json(SESS, w)
  if not s or s.sid ~= sid then
    return nil, fail('session_fenced')
  end
  if s.x <= snow then return nil, fail('session_expired') end
  return s, nil
end


-- Returns rec, owner or nil plus an error reply (memory.py `_owner_checked`).
local function owner_checked(pid, w, epoch)
  local rec, owner = get_rec(pid), get_owner(pid)
  if not rec then return nil, nil, fail('ownership_conflict', 'not_found') end
  if not owner then return nil, nil, fail('ownership_conflict', 'not_owned') end
  if owner.w ~= w then return nil, nil, fail('ownership_conflict', 'wrong_worker') end
  if owner.e ~= epoch then return nil, nil, fail('ownership_conflict', 'wrong_epoch') end
  return rec, owner, nil
end

local function owner_view(pid, owner)
  return {id = pid, w = owner.w, e = owner.e, l = owner.l, d = owner.d}
end

local function release(pid)
  local rec, owner = get_rec(pid), get_owner(pid)
  local t = track_begin(pid, rec, owner)
  drop_owner(pid)
  track_end(pid, t, rec.u, rec, nil)
end

-- The drain barrier, read from stored state only (memory.py `_drain_status`).
-- `known` may carry the live session and fresh runtime a caller already holds (write_report
-- checks every pending ticket of a worker: decoding them once keeps that linear).
local function drain_status(pid, w, stated_idle, snow, known)
  local ticket = get_json(TICKETS, pid)
  local session
  if known then session = known.session else session = live_session(w, snow) end
  local bound = ticket.sv
  if not bound or not session or session.g ~= ticket.g or not session.ack
     or session.ack.v < bound or session.ack.e < ticket.re then
    return 'waiting_snapshot'
  end
  local rt
  if known then rt = known.rt else rt = fresh_runtime(w, snow) end
  if rt then
    local entry = rt.en[pid]
    if entry and (entry[3] > 0 or entry[4] > 0) then return 'waiting_counts' end
    if rt.sv >= bound then return 'released' end
  end
  if stated_idle then return 'released' end
  return 'waiting_counts'
end

-- The start of every operation: name the namespace's keys (cached while the namespace stays
-- the same), forget the previous call's touched keys, refuse a foreign data layout.
local function bind(meta)
  touched, pending, stored_counts, call_ttl = {}, {}, {}, nil
  hbuf, zbuf, rcache, named = {}, {}, {}, {}
  if meta ~= META then
    META, NS = meta, string.sub(meta, 1, #meta - 4)
    R, HOT, HEALTH = k('records'), k('hot'), k('health')
    UNIQ, EXP, AVAIL = k('unique'), k('expiry'), k('available')
    INV, MANAGED_COUNT = k('inventory'), k('managed')
    OWN, OWN_EXP, TICKETS, EPOCH = k('owners'), k('owner-expiry'), k('drain-tickets'), k('epoch')
    SESS, SESS_EXP = k('worker-sessions'), k('worker-session-expiry')
    RT, RT_EXP, GEN = k('worker-runtime'), k('worker-runtime-expiry'), k('session-generation')
    OUTCOMES, QUAR = k('outcomes'), k('quarantine')
    QUAR_EXP, QUAR_EXITS = k('quarantine-expiry'), k('quarantine-exits')
    FIXED = {META, R, HOT, HEALTH, UNIQ, EXP, AVAIL, INV, MANAGED_COUNT, OWN, OWN_EXP, TICKETS,
             EPOCH, GEN}
  end
  local stored = redis.call('HGET', META, 'layout')
  if stored and stored ~= LAYOUT then return fail('layout_mismatch') end
  return nil
end
