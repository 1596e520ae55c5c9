-- metrics/lib.lua: key names and stream helpers of the usage stream's function library
-- (pool_admin/metrics/group.py joins this file and every operation file here, each wrapped as
-- one registered function, into one library, as the pool's and the scheduler's are built).
-- Only declarations at the top level: Redis runs a library's top level without `redis.call`.
--
-- Keys: KEYS[1] of every operation is the stream, `<prefix>:{metrics}:events`, and `bind`
-- names the keys beside it. They carry the stream's hash tag (group.py refuses a stream key
-- without one), so every key an operation touches is in one Cluster slot:
--   <stream>            STREAM usage events, consumer group "aggregates"
--   <stream>:lost       HASH total: entries trimmed before a consumer applied them
--   <stream>:unsettled  ZSET id -> ms: pending entries trimmed, their fate not looked up yet
-- The group and the consumer are ARGV[1] and ARGV[2] of every operation that needs them.
--
-- Replies and errors are Redis's own (`Scripts.call_raw`), not JSON: stream entries carry the
-- producers' bytes, which JSON could not hold unchanged, and a missing stream or group is
-- Redis's NOGROUP error, on which the consumer makes the group again. No operation reads TIME.

local STREAM, LOST, UNSETTLED
local function bind(stream)
  STREAM, LOST, UNSETTLED = stream, stream .. ':lost', stream .. ':unsettled'
end

-- A flat RESP2 map (XINFO's replies) as a table; nil values come as false.
local function as_map(flat)
  local map = {}
  for i = 1, #flat, 2 do map[flat[i]] = flat[i + 1] end
  return map
end

local function parse_id(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

-- An entry's score in the unsettled set: the ms part of its ID.
local function id_ms(id)
  return (parse_id(id))
end

local function id_below(a, b)
  local ams, aseq = parse_id(a)
  local bms, bseq = parse_id(b)
  return ams < bms or (ams == bms and aseq < bseq)
end

-- The greatest ID below `id` (no entry can lie between the two).
local function id_before(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if tonumber(seq) > 0 then return ms .. '-' .. string.format('%d', tonumber(seq) - 1) end
  return string.format('%d', tonumber(ms) - 1) .. '-18446744073709551615'
end
