-- lib/ownership_drain.lua: worker ownership (assign, renew, expire, worker_assignments), a
-- worker's holdings revision (worker_revision) and the drain barrier (begin_drain,
-- acknowledge_drain, drain_tickets, and write_report's release of drained proxies).

-- A worker's holdings revision (docs/activity-pool.md "Holdings revision"): one more, in the
-- step that makes the change, for every change to one of the worker's assignments that are not
-- draining (what its snapshot holds) and every rewrite of a record it holds without draining,
-- so the control plane can tell an unchanged snapshot without reading the holdings. A draining
-- assignment is out of the snapshot: its lease and its release change nothing there. The changes come through three places only:
-- set_lease, drop_owner and begin_drain.lua, plus upsert.lua's refresh of a held record.
-- MemoryPool's pair: `PoolState.bump_revision` (activity/memory/_state.py).
local function bump_revision(w)
  local key = worker_revision_key(w)
  -- A counter this call creates (its worker had neither a session nor a holding to keep it)
  -- gets a lifetime at once: a cleaning call that never extends keys (extract, sweep) would
  -- otherwise leave it forever. `touch` takes it to the horizon when the call extends keys.
  if redis.call('INCR', key) == 1 and redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, GRACE_MS)
  end
  touch(key)
end

local function revision_of(w)
  return tonumber(redis.call('GET', worker_revision_key(w)) or '0')
end

local function set_lease(pid, owner, lease)
  owner.l = lease
  if not owner.d then bump_revision(owner.w) end
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
  if not owner.d then bump_revision(owner.w) end
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

-- Returns rec, owner or nil plus an error reply (`Ownership._owner_checked` in
-- activity/memory/ownership.py).
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

-- The drain barrier, read from stored state only (activity/memory/ownership.py `_drain_status`).
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
