-- lib/core.lua: the primitives every other part of the RedisPool function library is built on:
-- key names, the per-call write buffer, counters, key lifetimes, the pool generation and the
-- server's clock. activity/redis/_scripts.py joins lua/lib/*.lua (in its LIB_PARTS order, this
-- file first) and every operation file into one library, loaded once (FUNCTION LOAD): the
-- helpers are created once per load, not once per call (as a prelude of every EVALSHA they cost
-- more than the operations themselves: docs/PERFORMANCE.md). lua/README.md has the rules every
-- part keeps (only declarations at the top level; a part uses only what the parts before it
-- declare).
--
-- The rule this file exists for: hashes and sorted sets are read and written only through the
-- buffer primitives below (hget, prefetch, hset, hdel, hexists, zadd, zrem, zread) and the
-- counters (bump, counter). A `redis.call` on a hash or sorted set anywhere else would read
-- past this call's buffered writes, or write under them. tests/activity/test_lua_rules.py
-- fails when any other file does (its short list of exceptions says why each is safe).
--
-- Keys: KEYS[1] of every operation is the namespace's meta key `<prefix>:{activity}:meta`;
-- `bind` derives every other key from it. Index keys depend on a record's own labels (its region,
-- carrier, ...), which no caller can know before the script has read the record, so they are
-- named inside the script. All of them carry the `{activity}` hash tag: one slot, as the ADR's
-- Cluster single-slot option requires.

local LAYOUT = '1'
local META, NS, R, HOT, HEALTH, UNIQ, EXP, AVAIL, INV, MANAGED_COUNT
local OWN, OWN_EXP, TICKETS, EPOCH, SESS, SESS_EXP, RT, RT_EXP, GEN, FIXED
local OUTCOMES, QUAR, QUAR_EXP, QUAR_EXITS, EXPIRED_COUNTS
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

local function tonum(s) return tonumber(s) end

local function get_json(hash, field)
  local raw = hget(hash, field)
  if raw then return cjson.decode(raw) end
  return nil
end

-- Key names built from labels in this call (`named_key`, lua/lib/keys.lua); bind clears them.
local named = {}

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

-- A counters hash's values, with this call's pending changes, and the hash emptied: what a
-- reader takes out (the expiry tally that sweep.lua hands to the usage metrics). Bounded by
-- the hash's own size (a field per upstream and kind).
local function take_counts(hash)
  local taken = {}
  local flat = redis.call('HGETALL', hash)
  for i = 1, #flat, 2 do taken[flat[i]] = tonumber(flat[i + 1]) end
  for field, delta in pairs(pending[hash] or {}) do taken[field] = (taken[field] or 0) + delta end
  pending[hash] = nil
  stored_counts = {}  -- HGETs cached by `counter` read the hash before it was emptied
  redis.call('DEL', hash)
  return taken
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

-- The server's clock, read once per operation as its "now" and never waited on: Valkey
-- freezes TIME for the whole run of a script, so a loop on it would never end there
-- (lua/README.md).
-- The server's replication history (docs/activity-pool.md "Generation"). The caller's
-- connection learned its server's master_replid when it connected and sends it as `arg`
-- ('' when unknown: a replica, INFO refused). META keeps the replid the pool's data was
-- written under. A promoted replica has a new replid and may lack the last writes its old
-- primary acknowledged (an asynchronous failover), so nothing that promised exclusivity
-- carries over (ADR-005 "故障语义", docs/DECISIONS.md): the pool generation ends (the next
-- extract starts one), every worker session ends (each worker opens a new one and is sent
-- what this server holds), and the counters whose values workers hold jump past any value the
-- lost writes could have used, so no epoch or session generation is ever handed out twice.
--
-- But a master also takes a new replid with its data whole: when its first replica attaches,
-- and when it frees its backlog after repl-backlog-ttl without replicas; and a connection made
-- before such a change still carries the old one. So a replid that differs from META's is
-- never acted on as sent: the call is refused before it writes anything (HISTORY_UNCONFIRMED,
-- an error reply the transport never passes on, activity/redis_transport.py), and the
-- connection asks its server again and resends it as '<replid>!<promoted>': promoted '1' when
-- the server's master_replid2 is set (a promotion made it: the history it came from is
-- another), '0' when not (a new replid for the same data). Only a confirmed, promoted replid
-- ends the history; a confirmed '0' is recorded and ends nothing. A META without one (the
-- first run after the upgrade, an empty namespace) records the caller's and ends nothing.
-- Atomic: of several callers that confirm a new history at once, the first ends the old one
-- and the others find the new replid stored.
-- A jump larger than the increments a lost window can hold (about a second of writes with
-- min-replicas-max-lag 1, docs/OPERATIONS.md; an epoch moves once per drain).
local HISTORY_JUMP = 1000000
local HISTORY_UNCONFIRMED = 'HISTORY unconfirmed: ask the server again and resend'

local function end_history()
  redis.call('HDEL', META, 'generation')
  redis.call('DEL', SESS, SESS_EXP, RT, RT_EXP)
  -- Unconditionally: a counter the lost writes created is missing here, and counting again
  -- from 1 would hand out values they already gave.
  local ttl = redis.call('PTTL', META)
  for _, counter_key in ipairs({GEN, EPOCH}) do
    redis.call('INCRBY', counter_key, HISTORY_JUMP)
    if redis.call('PTTL', counter_key) < 0 and ttl > 0 then
      redis.call('PEXPIRE', counter_key, ttl)
    end
  end
end

-- Before any write of the calling operation. Returns the error reply to return as is (or
-- nil), and the pool generation stored now, read in the same command (nil: none, or not read),
-- for pool_generation: an extract reads META once.
local function check_history(arg)
  if arg == '' then return nil, nil end
  local replid, promoted = string.match(arg, '^([^!]*)!([01])$')
  local confirmed = replid ~= nil
  if not confirmed then replid = arg end
  local found = redis.call('HMGET', META, 'replid', 'generation')
  local known, generation = found[1] or nil, found[2] or nil
  if known == replid then return nil, generation end
  if known and not confirmed then return redis.error_reply(HISTORY_UNCONFIRMED), nil end
  if known and promoted == '1' then
    end_history()
    generation = nil
  end
  redis.call('HSET', META, 'replid', replid)
  if redis.call('PTTL', META) < 0 then redis.call('PEXPIRE', META, GRACE_MS) end
  return nil, generation
end

-- The pool generation (ADR-005: losing Redis ends a generation): an ID kept in META, which
-- lives as long as any proxy record (its TTL reaches the horizon), so it changes when the
-- namespace's records are lost (a restart of a Redis without persistence, a flush, an idle
-- namespace that expired) and when the history ends (check_history). Made from `seed`, a
-- fresh random hex string of the calling operation (extract's nonce), the first time it is
-- asked for; a META made here outlives nothing (GRACE_MS) unless a write extends it to the
-- horizon. `stored`: the generation the operation already read (check_history), if any.
local function pool_generation(seed, stored)
  local generation = stored or redis.call('HGET', META, 'generation')
  if generation then return generation end
  generation = string.sub(seed, 1, 16)
  redis.call('HSET', META, 'generation', generation)
  if redis.call('PTTL', META) < 0 then redis.call('PEXPIRE', META, GRACE_MS) end
  return generation
end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The start of every operation: name the namespace's keys (cached while the namespace stays
-- the same), forget the previous call's touched keys, and name the error code of a foreign
-- data layout (nil when it is this one).
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
    EXPIRED_COUNTS = k('expired-counts')
    FIXED = {META, R, HOT, HEALTH, UNIQ, EXP, AVAIL, INV, MANAGED_COUNT, OWN, OWN_EXP, TICKETS,
             EPOCH, GEN}
  end
  local stored = redis.call('HGET', META, 'layout')
  if stored and stored ~= LAYOUT then return 'layout_mismatch' end  -- the wrapper's refusal
  return nil
end
