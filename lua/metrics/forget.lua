-- forget.lua: consumers with nothing pending, idle long enough, leave the group.
-- KEYS[1] the stream (lib.lua names the keys beside it)
-- ARGV[1] group   ARGV[2] the consumer that asks (kept)   ARGV[3] idle ms   ARGV[4] most
-- Returns: how many left
-- Errors: NOGROUP (no stream or no such group)
--
-- In one step: XGROUP DELCONSUMER drops a consumer's pending entries with it, so the check
-- that it has none and the deletion cannot be apart (a consumer that claimed entries in
-- between would lose them). Bounded by the group's consumers (this keeps them few: every
-- claim round forgets up to ARGV[4] idle ones) and by ARGV[4] deletions.
assert(#ARGV == 4, 'forget: arity')
local group, keep, idle, most = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local gone = 0
for _, flat in ipairs(redis.call('XINFO', 'CONSUMERS', STREAM, group)) do
  if gone >= most then break end
  local c = as_map(flat)
  if c['name'] ~= keep and c['pending'] == 0 and c['idle'] >= idle then
    redis.call('XGROUP', 'DELCONSUMER', STREAM, group, c['name'])
    gone = gone + 1
  end
end
return gone
