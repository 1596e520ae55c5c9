-- lib/sweep.lua: deleting expired records, bounded: ADR-005 "短 TTL 清理" layers 1-2 (the
-- cleaning every write does first, and that upsert does for its own upstream) and layer 3
-- (lua/sweep.lua).

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
  zrem(checks_key(rec.u), pid)  -- whatever track_begin left there (records.lua)
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

-- Remove a record past its hard expiry, tallied by upstream as used (extracted, or assigned
-- to a worker) or never used, for the usage metrics (sweep.lua takes the tally). Every removal
-- at expiry goes through here, or the waste figures undercount (PoolState.expire is the pair).
local function expire_rec(pid, rec)
  local used = rec.s == 'extracted' or get_owner(pid) ~= nil
  bump(EXPIRED_COUNTS, rec.u .. (used and '|used' or '|unused'), 1)
  delete_rec(pid, rec)
end

-- Remove up to `limit` records past their hard expiry from `zkey` (global or one upstream's).
local function clean_expired(now, limit, zkey)
  local due, more = due_members(zkey or EXP, now, limit)
  for _, pid in ipairs(due) do
    local rec = get_rec(pid)
    if rec then
      expire_rec(pid, rec)
    else  -- an index entry without its record (never expected): drop it, do not stop
      zrem(EXP, pid)
      if zkey then zrem(zkey, pid) end
    end
  end
  return #due, more
end
