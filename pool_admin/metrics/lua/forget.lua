-- forget.lua: consumers with nothing pending, idle long enough, leave the group
-- (pool_admin/metrics/group.py).
-- KEYS[1] the stream
-- ARGV[1] group   ARGV[2] the consumer that asks (kept)   ARGV[3] idle ms   ARGV[4] most
-- Returns: how many left
-- Errors: NOGROUP (no stream or no such group)
--
-- In one step: XGROUP DELCONSUMER drops a consumer's pending entries with it, so the check
-- that it has none and the deletion cannot be apart (a consumer that claimed entries in
-- between would lose them). Bounded by the group's consumers, which this keeps few.
assert(#KEYS == 1 and #ARGV == 4, 'forget: arity')
local group, keep, idle, most = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local gone = 0
for _, flat in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], group)) do
  if gone >= most then break end
  local c = {}
  for i = 1, #flat, 2 do c[flat[i]] = flat[i + 1] end
  if c['name'] ~= keep and c['pending'] == 0 and c['idle'] >= idle then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], group, c['name'])
    gone = gone + 1
  end
end
return gone
