-- lease/lib.lua: the tick leases' function library (activity/tick_lease/redis.py joins this file
-- and every operation file here, each wrapped as one registered function, as the pool's and the
-- scheduler's libraries are built). Only declarations at the top level.
--
-- Keys: KEYS[1] of every operation is `<prefix>:{lease}:meta` (never written), and `bind` names
-- the lease beside it, under the same hash tag:
--   <prefix>:{lease}:<name>   STRING {"h": holder, "x": expiry ms on the caller's clock}
-- The expiry is the caller's, as the fetch scheduler's leases are: a holder whose clock says
-- its lease is over stops, and another takes it. The key's own TTL (twice the lease) only lets
-- an abandoned lease free itself.

local KEY
local function bind(meta, name)
  KEY = string.sub(meta, 1, -5) .. name
end
local function ok(value) return cjson.encode({ok = value}) end
-- The lease as stored, or nil when there is none or it ended by `now`.
local function current(now)
  local raw = redis.call('GET', KEY)
  if not raw then return nil end
  local lease = cjson.decode(raw)
  if lease.x <= now then return nil end
  return lease
end
local function hold(holder, now, ttl)
  redis.call('SET', KEY, cjson.encode({h = holder, x = now + ttl}), 'PX', ttl * 2)
end
