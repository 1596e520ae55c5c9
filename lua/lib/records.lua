-- lib/records.lua: a proxy's record as the operations read and write it, and what is derived
-- from it: the index keys it sits in, the inventory/managed flags, and the track_begin/track_end
-- bracket that keeps counters and index membership in step with every change of a record
-- (MemoryPool: `PoolState.tracking`, activity/memory/_state.py). Used by every family below.

local TERMINAL = {extracted = true, removed = true}
local MANAGED = {fetched = true, checking = true, available = true, suspect = true, draining = true}
-- States an idle proxy is rechecked in (take_due_checks.lua); the pair of RECHECKED in
-- activity/memory/_state.py.
local RECHECKED = {available = true, suspect = true}

-- A proxy is stored in two parts. `records` holds its static JSON, built by Python at upsert
-- (address, labels, lifetimes, credentials) and only ever handed back verbatim; `hot` holds
-- what the operations read and change, as one delimited string that needs no JSON work:
--   state|expires|usable|checked|max|upstream|protocol|region|carrier|key digest|extracted by
-- (region and carrier are their matching forms, activity/labels.py's label_key, which escapes
-- '|'; the other labels are tokens without it; the client ID comes last, so it may hold anything).
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
-- An upstream's proxies to check again (take_due_checks.lua): unassigned AVAILABLE and SUSPECT
-- ones scored by their last check (kept here), new ones scored by their fetch time until
-- their first check (upsert.lua), re-scored by take_due_checks.lua when taken or examined;
-- entries of records that left those states are removed lazily (there, or by delete_rec).
local function checks_key(u) return named_key('checks', u) end

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

-- Every state, ownership or expiry change of a proxy is bracketed by track_begin/track_end,
-- so counters and index membership stay derived from the record (`PoolState.tracking` in
-- activity/memory/_state.py).
-- keep_checks (extract only): leave the record in its upstream's checks index. Extract is the
-- hot path, and one ZREM more per call cost it 5-15% (docs/PERFORMANCE.md); the EXTRACTED
-- entry left behind is removed by the next take_due_checks that examines it, or with the
-- record (delete_rec).
local function track_begin(pid, rec, owner, keep_checks)
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
  if rec and not owner and RECHECKED[rec.s] and rec.ck and not keep_checks then
    zrem(checks_key(rec.u), pid)
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
  if rec and not owner and RECHECKED[rec.s] and rec.ck then
    local key = checks_key(rec.u)
    zadd(key, rec.ck, pid)
    touch(key)
  end
end
