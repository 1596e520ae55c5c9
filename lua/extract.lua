-- extract.lua: ADR-005 "独占提取", the seven steps in one atomic operation.
-- KEYS[1]  <prefix>:{activity}:meta
-- ARGV[1]  now (caller clock, ms)   ARGV[2] client ID   ARGV[3] count   ARGV[4] mode
-- ARGV[5]  JSON array of [dimension, [value, ...]] filters, in index order, values sorted
--          (any one of a dimension's values matches)
-- ARGV[6]  max health age ms (-1: any)   ARGV[7] min remaining ms   ARGV[8] reserve
-- ARGV[9]  scan_budget   ARGV[10] clean_budget
-- ARGV[11] replay key suffix ("idem:<digest>", "op:<digest>", or "" when the caller gave
--          neither a key nor a request ID: nothing to replay, nothing stored)
-- ARGV[12] request digest   ARGV[13] replay TTL ms (capped here by the earliest hard expiry)
-- ARGV[14] nonce of this call (its own low-level retry is not a replay to the caller)
-- ARGV[15] the client's CallQuota as JSON {calls, call_window, proxies, proxy_window} (windows
--          in ms), or "" for none: every call takes one call unit first, once (a replay and a
--          conflict too; not this call's own retry); count more proxies must fit; the returned
--          are charged
-- ARGV[16] the server's replication ID as the connection learned it ("" unknown), or
--          "<replid>!<promoted>" confirmed: see check_history in lua/lib/core.lua (an
--          unconfirmed new one is refused with an error reply before anything is written)
-- Returns: {"ok": {"replayed": bool, "result": {proxies: [static record JSON array], requested,
--          generation: the generation its proxies were handed out under (absent in results
--          stored before it was kept)}, "generation": the pool generation now
--          (pool_generation, seeded by this call's nonce)}}
-- Errors: quota_exceeded (reason calls or proxies) {retry_after_ms, left}: nothing changed but
--         the call unit of a call refused for its proxies; idempotency_conflict,
--         scan_budget_exhausted (never reported as "not enough"),
--         insufficient_inventory {requested, available}, layout_mismatch
assert(#KEYS == 1 and #ARGV == 16, 'extract: arity')
local now, client, count, mode = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3]), ARGV[4]
local filters = cjson.decode(ARGV[5])
local max_age, min_remaining, reserve = tonum(ARGV[6]), tonum(ARGV[7]), tonum(ARGV[8])
local budget, clean_budget = tonum(ARGV[9]), tonum(ARGV[10])
local replay_key, request_digest, replay_ttl = ARGV[11], ARGV[12], tonum(ARGV[13])
if replay_key ~= '' then replay_key = k(replay_key) end
local nonce = ARGV[14]
local quota = nil
if ARGV[15] ~= '' then quota = cjson.decode(ARGV[15]) end

-- The history first, before anything is written (check_history in lua/lib/core.lua): no proxy
-- is handed out under a generation whose history has ended, and a replication ID to confirm
-- is refused while nothing has changed.
local unconfirmed, stored_generation = check_history(ARGV[16])
if unconfirmed then return unconfirmed end
local generation = nil
local function current_generation()
  if not generation then generation = pool_generation(nonce, stored_generation) end
  return generation
end
local function reply(result_json, replayed)
  return '{"ok":{"replayed":' .. tostring(replayed) .. ',"result":' .. result_json
    .. ',"generation":"' .. current_generation() .. '"}}'
end

-- Own retry: this call's low-level retry (same nonce) gets its first attempt's stored answer.
local stored, replayed = nil, false
if replay_key ~= '' then
  stored, replayed = replay(replay_key, request_digest, now, nonce)
  if stored and not replayed then return reply(stored, false) end
end

-- Quota, calls: the client's call unit, once per call (a replay and a conflict take one too);
-- a retry whose first attempt took it but stored no answer (a replay, a refusal after the
-- unit) finds the marker `done` left, and takes none.
local mark = nil -- the marker to leave: a unit taken by a retry-safe call
local function take_call_unit()
  local charged = nil
  if replay_key ~= '' then charged = k('quota-charged:' .. nonce) end
  if charged and redis.call('EXISTS', charged) == 1 then return nil end
  local refused = quota_take(client, quota, 'calls', now, 1)
  if not refused then mark = charged end
  return refused
end
if quota then
  local refused = take_call_unit()
  if refused then return refused end
end
-- `answer`, leaving the marker of the unit taken when no answer is stored under the nonce.
local function done(answer)
  if mark then redis.call('SET', mark, '1', 'PX', QUOTA_RETRY_MARK_MS) end
  return answer
end

-- 1. idempotency: the same key and request replay; another request under it conflicts
if stored == false then return done(fail('idempotency_conflict')) end
if stored then return done(reply(stored, true)) end

-- Quota, proxies: count more must fit; what step 6 hands out is charged to this counter.
local proxies_counter = nil
if quota then
  local refused
  refused, proxies_counter = quota_take(client, quota, 'proxies', now, count, true)
  if refused then return done(refused) end
end

clean_expired(now, clean_budget)

-- 2. the candidates of a dimension: the union of its values' indexes (disjoint: a proxy has one
-- value per dimension); drive from the smallest, ties to the most specific (filters come first)
-- (a source: {keys, their sizes, the sum})
local available = zread('ZCARD', AVAIL)
local sources = {{{AVAIL}, {available}, available}}
for _, f in ipairs(filters) do
  local keys, sizes, sum = {}, {}, 0
  for i, value in ipairs(f[2]) do
    keys[i] = index_key(f[1], value)
    sizes[i] = zread('ZCARD', keys[i])
    sum = sum + sizes[i]
  end
  sources[#sources + 1] = {keys, sizes, sum}
end
local driving = sources[#sources]
for i = #sources - 1, 1, -1 do
  if sources[i][3] < driving[3] then driving = sources[i] end
end

-- 3. bounded re-check of every candidate
local threshold = now + min_remaining
local need = count + reserve
local wanted = {}
for _, f in ipairs(filters) do
  local set = {}
  for _, value in ipairs(f[2]) do set[value] = true end
  wanted[f[1]] = set
end
local matches = {}
-- Read each driving index in pages by rank (O(log N + page) each) and merge them: soonest
-- usable-until first, equal scores to the earlier value's index (the memory model's stable
-- heapq.merge). Never more than the budget is examined: a request satisfied early costs what it
-- used. Each index reads at most twice what was taken from it plus its first page.
local heads, above = {}, 0
local first_page = math.max(need * 2, 8)
for i, key in ipairs(driving[1]) do
  local first = zread('ZCOUNT', key, '-inf', threshold)
  local n = driving[2][i] - first
  heads[i] = {key = key, next = first, stop = first + n, page = first_page, buf = {}, at = 1}
  above = above + n
end
local scanned = 0
-- The head's current (member, score), reading its next page when the buffer is spent.
local function peek(h)
  if h.at > #h.buf then
    local n = math.min(h.page, h.stop - h.next, budget - scanned)
    if n <= 0 then return nil end
    h.buf, h.at = zread('ZRANGE', h.key, h.next, h.next + n - 1, 'WITHSCORES'), 1
    h.next, h.page = h.next + n, h.page * 2
  end
  return h.buf[h.at], tonum(h.buf[h.at + 1])
end
while scanned < budget and #matches < need do
  local best, best_pid, best_score = nil, nil, nil
  for _, h in ipairs(heads) do
    local pid, score = peek(h)
    if pid and (best_score == nil or score < best_score) then
      best, best_pid, best_score = h, pid, score
    end
  end
  if not best then break end
  best.at = best.at + 2
  scanned = scanned + 1
  local rec = get_rec(best_pid)
  local fine = rec.s == 'available' and not hexists(OWN, best_pid)
    and rec.e > now and rec.uu > threshold
  if fine and max_age >= 0 then fine = rec.ck ~= nil and now - rec.ck <= max_age end
  if fine then
    local actual = {upstream = rec.u, region = rec.r, carrier = rec.c, protocol = rec.pr}
    for dim, set in pairs(wanted) do
      if not set[actual[dim]] then fine = false end
    end
  end
  if fine then matches[#matches + 1] = {best_pid, rec} end
end
if #matches < need and above > budget then
  return done(fail('scan_budget_exhausted'))
end

-- 4./5. keep the gateway reserve back; partial or all-or-nothing
local take = math.min(count, math.max(0, #matches - reserve))
if mode == 'all_or_nothing' and take < count then
  return done(fail('insufficient_inventory', nil, {requested = count, available = take}))
end

-- 6./7. AVAILABLE -> EXTRACTED, inventory down, the replay stored
local proxies = {}
local earliest = nil
for i = 1, take do
  local pid, rec = matches[i][1], matches[i][2]
  local t = track_begin(pid, rec, nil, true)  -- its checks entry goes later (records.lua)
  rec.s, rec.x = 'extracted', client
  put_rec(pid, rec)
  track_end(pid, t, rec.u, rec, nil)
  proxies[i] = hget(R, pid)
  if earliest == nil or rec.e < earliest then earliest = rec.e end
end
if proxies_counter and take > 0 then quota_add(proxies_counter, take, now) end
local result = '{"proxies":[' .. table.concat(proxies, ',') .. '],"requested":' .. count
  .. ',"generation":"' .. current_generation() .. '"}'
if replay_key ~= '' then
  local expires = now + replay_ttl
  if earliest and earliest < expires then expires = earliest end -- never outlive a proxy
  remember(replay_key, request_digest, result, expires, now, nonce)
end
-- No finish(): extract only removes index members and moves counters of fixed keys, which
-- already live to the horizon; the replay key has its own TTL.
return reply(result, false)
