-- read_new.lua: the usage stream's consumer reads new entries, after telling what the stream
-- trimmed before the group read it (pool_admin/metrics/group.py).
-- KEYS[1] the stream   KEYS[2] its lost-entries hash
-- ARGV[1] group   ARGV[2] consumer   ARGV[3] most entries to read
-- Returns: {lost, entries, last}: lost is the entries trimmed unread counted now (-1: some
--          were, Redis cannot tell how many); entries as XREADGROUP gives them (no BLOCK
--          here); last the stream's last ID (the caller waits for entries after it).
-- Errors: NOGROUP (no stream or no such group: the caller makes it again)
--
-- Why a script: with the group's last delivered ID below the stream's first entry, every entry
-- between them was trimmed unread, and there are entries-added - length - entries-read of
-- them. Redis 7.0 keeps entries-read exact only while no such gap is read across: reading
-- across one adds 1 per entry read, not the gap, so the counter (and the group's lag) would be
-- short by the gap for good. So the gap is counted and the group moved to just before the
-- first entry with its counter set exact (XGROUP SETID ... ENTRIESREAD), in the same atomic
-- step as the read that would have crossed it: no trim can come between.
assert(#KEYS == 2 and #ARGV == 3, 'read_new: arity')
local stream, lost_key = KEYS[1], KEYS[2]
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

if redis.call('EXISTS', stream) == 0 then
  return redis.error_reply('NOGROUP the stream is gone')
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

local info = as_map(redis.call('XINFO', 'STREAM', stream))
local mine = nil
for _, flat in ipairs(redis.call('XINFO', 'GROUPS', stream)) do  -- bounded: the groups
  local g = as_map(flat)
  if g['name'] == group then mine = g end
end
if not mine then return redis.error_reply('NOGROUP no such group') end

local lost = 0
local first = info['first-entry']
if first and id_below(mine['last-delivered-id'], first[1]) then
  local before_first = info['entries-added'] - info['length']
  local read = mine['entries-read']
  if not read and mine['last-delivered-id'] == '0-0' then read = 0 end  -- nothing read yet
  if read then
    lost = math.max(0, before_first - read)
  else
    lost = -1  -- Redis cannot tell what the group read (entries were deleted): some were lost
  end
  if lost ~= 0 then
    redis.call('XGROUP', 'SETID', stream, group, id_before(first[1]), 'ENTRIESREAD', before_first)
    if lost > 0 then redis.call('HINCRBY', lost_key, 'total', lost) end
  end
end
local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
                         'STREAMS', stream, '>')
return {lost, reply and reply[1] and reply[1][2] or {}, info['last-generated-id']}
