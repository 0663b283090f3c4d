# Reads {"x": n} on stdin, answers "high" when n >= threshold (from params.json).
read -r line
x=${line//[^0-9]/}
t=$(grep -o '"threshold": *[0-9]*' params.json | grep -o '[0-9]*$')
if [ "$x" -ge "$t" ]; then echo '{"answer": "high"}'; else echo '{"answer": "low"}'; fi
