-- Store.Complete's script up to commit d7d9a52, kept for upgrade_test.go:
-- ARGV[1] the 26-character token, ARGV[2] the state ('d' or 'p'), ARGV[3]
-- the outcome suffix, ARGV[4] the retention in ms, ARGV[5] the completion id.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local id = string.sub(v, 2, 27)
if string.sub(v, 1, 1) ~= 'c' then
  if id == ARGV[5] then return 1 end
  return 0
end
if #ARGV[1] ~= 26 or id ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2] .. ARGV[5] .. string.sub(v, 28) .. ARGV[3], 'PX', ARGV[4])
return 1
