-- read_new.lua: the usage stream's consumer reads new entries, after telling what the stream
-- trimmed before the group read it.
-- KEYS[1] the stream (lib.lua names the keys beside it)
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
-- step as the read that would have crossed it: no trim can come between. Bounded by ARGV[3]
-- entries and by the stream's groups (one: "aggregates").
assert(#ARGV == 3, 'read_new: arity')
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

if redis.call('EXISTS', STREAM) == 0 then
  return redis.error_reply('NOGROUP the stream is gone')
end

local info = as_map(redis.call('XINFO', 'STREAM', STREAM))
local mine = nil
for _, flat in ipairs(redis.call('XINFO', 'GROUPS', STREAM)) do
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
    redis.call('XGROUP', 'SETID', STREAM, group, id_before(first[1]), 'ENTRIESREAD', before_first)
    if lost > 0 then redis.call('HINCRBY', LOST, 'total', lost) end
  end
end
local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
                         'STREAMS', STREAM, '>')
return {lost, reply and reply[1] and reply[1][2] or {}, info['last-generated-id']}
