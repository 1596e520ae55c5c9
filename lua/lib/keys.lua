-- lib/keys.lua: the keys named from a value (an index per label value, an upstream's expiry
-- and owned sets, a worker's owned and draining sets and its holdings revision); core.lua's
-- `bind` names the fixed ones and says why these are named inside the script. Each is
-- `k(...)`: under the namespace's `{activity}` hash tag like every other key.

local function digest(value) return redis.sha1hex(value) end
-- Key names built from labels are kept for one call (in core.lua's `named`, which bind
-- clears): an upsert chunk or an extract names the same few index keys for every proxy it
-- touches.
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
local function worker_revision_key(w) return k('worker-rev:' .. digest(w)) end
local function index_key(dim, value) if dim == 'available' then return AVAIL end return named_key(dim, value) end
